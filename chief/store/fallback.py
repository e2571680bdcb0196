"""The fallback channel's durable ledger (issue 35, rung 3; `chief.fallback.task`
runs its use cases). Tables (every statement on them is here):

    fallback_outages   one row per Telegram outage the door saw: `since` (epoch seconds),
                       `reason` (the sender's last words), `ended_at` once a send went through
                       again; `told` once the Telegram message listing what went through the
                       fallback was queued (in the transaction that ended it)
    fallback_sends     one row per message owed to the fallback channel: the outage's notice
                       (one per outage: a unique index) or an urgent report (one per report
                       ever: `urgent_key` UNIQUE), its subject and body. `send_id` is the
                       in-flight record, written (FULL) before the send and cleared by its
                       mark (`sent_at`, `carried_by`: a digest carries several) or its
                       deferral; one still set at the start was sent or not, nobody knows: it
                       goes again marked as a possible repeat (`repeat`). An entry not sent
                       after all (Telegram came back, or the report stopped first) is deleted,
                       and so is an outage that sent nothing

The urgent reports still ringing are read from `urgent_reports` (chief.store.urgent owns it:
the one write here is its `reach_rung`, rung 3, in the transaction that queues a report's
entry). The Telegram message of the end of an outage goes on the Telegram queue through
`chief.store.telegram`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from chief.fallback_rules import (
    HOUR_S,
    NOTICE,
    REPORT,
    Entry,
    back_text,
    notice_message,
    report_message,
)
from chief.store import telegram, urgent
from chief.urgent_rules import FALLBACK_RUNG, URGENT_MARK
from plumbing.wire import MAX_TEXT_CHARS

_WAITING = "sent_at IS NULL"


@dataclass(frozen=True)
class Outage:
    id: int
    since: float
    reason: str


@dataclass(frozen=True)
class Turn:
    """What one look at Telegram changed: the outage open now (None: Telegram delivers),
    entries queued for the fallback, entries dropped, and whether the Telegram message of an
    outage's end was queued."""

    outage: Outage | None
    queued: int
    dropped: int
    told: bool
    #: urgent reports that climbed to rung 3 of their ladder in this look (their entry queued)
    climbed: int = 0


def _open_outage(conn: sqlite3.Connection) -> Outage | None:
    row = conn.execute(
        "SELECT id, since, reason FROM fallback_outages WHERE ended_at IS NULL "
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else Outage(int(row[0]), float(row[1]), str(row[2]))


def look(conn: sqlite3.Connection, now: float, failing: str | None, after_s: float) -> Turn:
    """ONE transaction (the caller's `write`): record what the door sees of Telegram at `now`
    (`failing`: why it cannot deliver, None: it delivers). An outage opens at the first
    failure; past `after_s` its notice and each urgent report still ringing are queued (once
    each, whatever repeats the look); entries of reports stopped meanwhile are dropped; a
    delivery ends the outage, drops what was not sent, and queues one Telegram message listing
    what went through the fallback."""
    outage = _open_outage(conn)
    if failing is None:
        if outage is None:
            return Turn(None, 0, 0, False)
        return _end(conn, outage, now)
    if outage is None:
        cursor = conn.execute(
            "INSERT INTO fallback_outages (since, reason) VALUES (?, ?)", (now, failing)
        )
        outage = Outage(int(cursor.lastrowid or 0), now, failing)
    elif outage.reason != failing:
        conn.execute("UPDATE fallback_outages SET reason = ? WHERE id = ?", (failing, outage.id))
        outage = Outage(outage.id, outage.since, failing)
    dropped = _drop_stopped(conn)
    queued = climbed = 0
    if now - outage.since >= after_s:
        queued, climbed = _queue_due(conn, outage, now)
    return Turn(outage, queued, dropped, False, climbed)


def durable_failure(conn: sqlite3.Connection) -> str | None:
    """Why Telegram failed, as chief.db keeps it across a restart: the Telegram queue head's
    last error (cleared with the entry once a send of it goes through)."""
    return telegram.status(conn).last_error


def _queue_due(conn: sqlite3.Connection, outage: Outage, now: float) -> tuple[int, int]:
    """Queue the outage's notice and each ringing report's entry: (entries queued, reports
    that climbed to rung 3 with theirs, recorded on the report in this transaction)."""
    (waiting,) = conn.execute("SELECT COUNT(*) FROM telegram_queue").fetchone()
    title, body = notice_message(outage.since, outage.reason, int(waiting), now)
    queued = conn.execute(
        "INSERT OR IGNORE INTO fallback_sends (outage_id, kind, title, body, queued_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (outage.id, NOTICE, title, body, now),
    ).rowcount
    climbed = 0
    for key, number, text in conn.execute(
        "SELECT urgent_key, rowid, text FROM urgent_reports "
        "WHERE acked_at IS NULL AND expired_at IS NULL ORDER BY created_at"
    ).fetchall():
        report = str(text).removeprefix(URGENT_MARK)
        title, body = report_message(int(number), report, outage.since, outage.reason)
        added = conn.execute(
            "INSERT OR IGNORE INTO fallback_sends (outage_id, kind, urgent_key, title, body, "
            "queued_at) VALUES (?, ?, ?, ?, ?, ?)",
            (outage.id, REPORT, key, title, body, now),
        ).rowcount
        queued += added
        climbed += added and urgent.reach_rung(conn, str(key), FALLBACK_RUNG)
    return int(queued), climbed


def _drop_stopped(conn: sqlite3.Connection) -> int:
    """Entries of urgent reports acknowledged or expired before they went: deleted, not
    sent."""
    return int(
        conn.execute(
            f"DELETE FROM fallback_sends WHERE {_WAITING} AND send_id IS NULL "
            "AND urgent_key IN (SELECT urgent_key FROM urgent_reports "
            "WHERE acked_at IS NOT NULL OR expired_at IS NOT NULL)"
        ).rowcount
    )


def _end(conn: sqlite3.Connection, outage: Outage, now: float) -> Turn:
    """What was not sent is deleted (a report still ringing when Telegram fails again goes
    then: its urgent key is free); an outage that sent nothing leaves no row."""
    dropped = conn.execute(
        f"DELETE FROM fallback_sends WHERE outage_id = ? AND {_WAITING} AND send_id IS NULL",
        (outage.id,),
    ).rowcount
    sent = [
        str(title)
        for (title,) in conn.execute(
            "SELECT title FROM fallback_sends WHERE outage_id = ? AND sent_at IS NOT NULL "
            "ORDER BY seq",
            (outage.id,),
        ).fetchall()
    ]
    told = bool(sent)
    if told:
        telegram.insert_telegram(conn, None, back_text(sent, outage.since, now)[:MAX_TEXT_CHARS])
    (left,) = conn.execute(
        "SELECT COUNT(*) FROM fallback_sends WHERE outage_id = ?", (outage.id,)
    ).fetchone()
    if not left:  # a passing failure: nothing went, nothing to keep
        conn.execute("DELETE FROM fallback_outages WHERE id = ?", (outage.id,))
        return Turn(None, 0, int(dropped), False)
    conn.execute(
        "UPDATE fallback_outages SET ended_at = ?, told = ? WHERE id = ?",
        (now, int(told), outage.id),
    )
    return Turn(None, 0, int(dropped), told)


# -- the sends ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    """The entries due now, how many messages went in the last hour and when the oldest of
    them leaves it, and when the earliest deferred entry is due."""

    entries: list[Entry]
    sent_in_hour: int
    hour_frees_at: float | None
    next_attempt_at: float | None
    #: whether any entry waits at all (due, deferred or in flight)
    pending: bool


def waiting(conn: sqlite3.Connection, now: float) -> Waiting:
    """Read what the fallback task may send at `now`."""
    entries = [
        Entry(int(seq), str(kind), str(title), str(body), bool(repeat))
        for seq, kind, title, body, repeat in conn.execute(
            f"SELECT seq, kind, title, body, repeat FROM fallback_sends WHERE {_WAITING} "
            "AND send_id IS NULL AND next_attempt_at <= ? ORDER BY seq",
            (now,),
        ).fetchall()
    ]
    sent, oldest = conn.execute(
        "SELECT COUNT(DISTINCT carried_by), MIN(sent_at) FROM fallback_sends WHERE sent_at > ?",
        (now - HOUR_S,),
    ).fetchone()
    (later,) = conn.execute(
        f"SELECT MIN(next_attempt_at) FROM fallback_sends WHERE {_WAITING} AND send_id IS NULL "
        "AND next_attempt_at > ?",
        (now,),
    ).fetchone()
    (pending,) = conn.execute(f"SELECT COUNT(*) FROM fallback_sends WHERE {_WAITING}").fetchone()
    return Waiting(
        entries,
        int(sent),
        None if oldest is None else float(oldest) + HOUR_S,
        None if later is None else float(later),
        bool(pending),
    )


def begin_send(conn: sqlite3.Connection, seqs: list[int], send_id: str) -> None:
    """The in-flight record: `send_id` carries these entries (committed before the send)."""
    marks = ", ".join("?" * len(seqs))
    conn.execute(f"UPDATE fallback_sends SET send_id = ? WHERE seq IN ({marks})", (send_id, *seqs))


def mark_sent(conn: sqlite3.Connection, send_id: str, now: float) -> None:
    """The channel took the message `send_id`: its entries sent, carried by it."""
    conn.execute(
        "UPDATE fallback_sends SET sent_at = ?, carried_by = send_id, send_id = NULL "
        "WHERE send_id = ?",
        (now, send_id),
    )


def defer(conn: sqlite3.Connection, send_id: str, next_attempt_at: float, error: str) -> None:
    """The channel did not take it: nothing went; try again at `next_attempt_at`."""
    conn.execute(
        "UPDATE fallback_sends SET send_id = NULL, attempts = attempts + 1, "
        "next_attempt_at = ?, last_error = ? WHERE send_id = ?",
        (next_attempt_at, error, send_id),
    )


def record_doubts(conn: sqlite3.Connection) -> int:
    """At the start: each entry a send still carries was sent or not, nobody knows; it goes
    again, marked as a possible repeat. How many."""
    return int(
        conn.execute(
            "UPDATE fallback_sends SET send_id = NULL, repeat = 1 WHERE send_id IS NOT NULL"
        ).rowcount
    )


# -- what an operator sees ---------------------------------------------------------------------


def status(conn: sqlite3.Connection, now: float) -> dict[str, object]:
    """The door status's `fallback` part."""
    outage = _open_outage(conn)
    (waiting_count,) = conn.execute(
        f"SELECT COUNT(*) FROM fallback_sends WHERE {_WAITING}"
    ).fetchone()
    (sent_total,) = conn.execute(
        "SELECT COUNT(DISTINCT carried_by) FROM fallback_sends WHERE sent_at IS NOT NULL"
    ).fetchone()
    head = conn.execute(
        f"SELECT last_error, next_attempt_at FROM fallback_sends WHERE {_WAITING} "
        "ORDER BY seq LIMIT 1"
    ).fetchone()
    (sent_in_hour,) = conn.execute(
        "SELECT COUNT(DISTINCT carried_by) FROM fallback_sends WHERE sent_at > ?",
        (now - HOUR_S,),
    ).fetchone()
    return {
        "telegram_failing_since": None if outage is None else outage.since,
        "telegram_failing_why": None if outage is None else outage.reason,
        "waiting": int(waiting_count),
        "sent": int(sent_total),
        "sent_last_hour": int(sent_in_hour),
        "last_error": None if head is None else head[0],
        "next_attempt_at": None if head is None or head[0] is None else float(head[1]),
    }
