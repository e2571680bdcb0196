"""The door's urgent reports (issue 28): the rings that come back until the owner acknowledges.

An urgent report is a notify row with `urgent: true` that rings (its Telegram entry queued): it
is known by its urgent key, the outbox id of the row that filed it (a retry of that row finds
it). Tables (every statement on them is here):

    urgent_reports    one row per urgent report: its Chief id, its text (marked `URGENT: `),
                      the ask of an urgent request (`ask_key`), the "Got it" token (`g-` + 22
                      url-safe characters from `secrets`: never an id), when it was accepted
                      (`created_at`, epoch seconds), the rings queued so far (`rings`, the first
                      included), the schedule (`next_at`: the next repeat or the expiry, NULL
                      until the nag task first sees it and once it stopped; `expires_at`), and
                      how it stopped: `acked_at` with `acked_via` (got_it | reply | settled;
                      NULL for `chief ack`) and `acked_by` (owner | second | machine | settle),
                      or `expired_at`; its ladder (issue 35): the `rung` reached (1 the owner's
                      chat, 2 the second person's too) and when it climbs next (`escalate_at`)
    urgent_messages   each Telegram message that rang one, (chat_id, message_id) -> urgent key,
                      its ring number, rung and text, and whether its "Got it" still shows
                      (`live`); written in the transaction of its sent mark

The ladder. Rung 2's ring is a Telegram queue entry in the second person's chat
(`telegram_queue.chat`), queued in the same transaction that moves the report to rung 2
(`ring_due`): a door killed before that commit queued nothing and climbs at its next turn; one
killed after it finds the entry queued and rings it once (an in-doubt send: once more, marked,
as every entry). `ringing` lists what still rings with its rung and text, `reach_rung` records
a higher rung once, and `acknowledge_key` stops a report by its key whoever acknowledges it:
the seam a further rung (the fallback channel) uses.

The Telegram queue entry of a ring names its urgent key (`telegram_queue.urgent`). A newer ring
remembered, or the report stopped, queues an edit of each older live message (its text plus a
note, its buttons removed) on the asks' edit queue (`chief.store.asks`, keyed by the urgent key
and request id 0 for a report that is not a request), which the door's ask task performs with
its backoff: one live "Got it" on the phone at a time.

The acknowledgement and the expiry each land their Chief line in the same transaction, as a
report row keyed after the urgent report's own (`coop-notify:<outbox id>#urgent-ack` or
`#urgent-expired`): once per report, whatever repeats it.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from dataclasses import dataclass, field, replace
from typing import Any

from chief.model import report_key
from chief.store import answers, asks, reports, telegram
from chief.store.sql import utc_now
from chief.urgent_rules import (
    ACK_SOURCE_SUFFIX,
    DEADLINE_DECIDED,
    EXPIRED_SOURCE_SUFFIX,
    GOT_IT_PREFIX,
    MACHINE,
    OWNER,
    OWNER_RUNG,
    RUNG_AGAIN_NOTE,
    SECOND_RUNG,
    SETTLE,
    URGENT_MARK,
    UrgentBounds,
    acknowledged_line,
    escalated_text,
    expired_line,
    repeat_text,
)
from plumbing.wire import MAX_TEXT_CHARS

TOKEN_BYTES = 16
# How long an expiry the owner never acknowledged stays in the door's status (and fails
# `coop status --check`): a day, or until acknowledged late.
EXPIRED_SHOWN_S = 24 * 3600.0
# The status lists at most this many of each.
STATUS_LIMIT = 20
_COLUMNS = (
    "urgent_key, chief_id, ask_key, text, token, created_at, rings, next_at, expires_at, rung"
)


@dataclass(frozen=True)
class UrgentRow:
    key: str
    chief_id: int
    ask_key: str | None
    text: str
    token: str
    created_at: float
    rings: int
    next_at: float | None
    expires_at: float | None
    rung: int = OWNER_RUNG

    @property
    def report(self) -> str:
        """The report's own text, without the urgent mark."""
        return self.text.removeprefix(URGENT_MARK)


@dataclass(frozen=True)
class Stopped:
    """An urgent report acknowledged or expired now: its Chief line (landed by the caller's
    drainer) and its report source id."""

    key: str
    line: str
    source_id: str


@dataclass(frozen=True)
class Acked:
    """What an acknowledgement found: `stopped` when this one stopped it (None: it had been
    acknowledged before, at `acked_at`)."""

    acked_at: float
    stopped: Stopped | None


@dataclass(frozen=True)
class DueTurn:
    """One turn of the urgent source: repeats queued, reports expired now, the next due time."""

    queued: int
    expired: list[Stopped]
    next_at: float | None
    #: the reports that climbed to rung 2 in this turn (their ring queued)
    escalated: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ringing:
    """An urgent report still ringing, as a further rung needs it: its key, its number (what
    `chief ack N` takes), its text (marked), the rung it reached, and when it was accepted."""

    key: str
    number: int
    text: str
    rung: int
    created_at: float


def _row(raw: tuple[object, ...]) -> UrgentRow:
    key, chief, ask, text, token, created, rings, next_at, expires, rung = raw
    return UrgentRow(
        str(key),
        int(str(chief)),
        None if ask is None else str(ask),
        str(text),
        str(token),
        float(str(created)),
        int(str(rings)),
        None if next_at is None else float(str(next_at)),
        None if expires is None else float(str(expires)),
        int(str(rung)),
    )


def mint_token() -> str:
    """A fresh "Got it" token: opaque, random, 24 ASCII bytes (Telegram takes 64)."""
    return GOT_IT_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def open_urgent(
    conn: sqlite3.Connection, chief_id: int, key: str, text: str, ask_key: str | None
) -> None:
    """Record the urgent report `key` (its first ring just queued); a retry changes nothing."""
    conn.execute(
        "INSERT OR IGNORE INTO urgent_reports (urgent_key, chief_id, ask_key, text, token, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (key, chief_id, ask_key, text, mint_token(), time.time()),
    )


# -- the use cases of other tables, with the urgent part added in the same transaction ------


def accept(
    conn: sqlite3.Connection, chief_id: int, rows: list[reports.ReportRow], queue_telegram: bool
) -> list[reports.Accepted]:
    """`reports.accept`, and in the same transaction: each urgent row queued to ring recorded
    (once), and the urgent reports of each ask a row settles stopped: acknowledged, or, when
    its deadline decided it (nobody answered), gone unacknowledged."""
    accepted = reports.accept(conn, chief_id, rows, queue_telegram)
    for row, found in zip(rows, accepted, strict=True):
        if row.extras.urgent and row.outbox_id is not None and found.telegram_seq is not None:
            ask_key = None if row.extras.ask is None else row.extras.ask.key
            open_urgent(conn, chief_id, row.outbox_id, row.text, ask_key)
        settles = row.extras.settles
        if settles is not None and settles.by == "deadline":
            expire_ask(conn, settles.key)
        elif settles is not None:
            acknowledge_ask(conn, settles.key)
    return accepted


def mark_rung(
    conn: sqlite3.Connection,
    seqs: list[int],
    outbox_ids: list[str],
    telegram_message_id: int | None,
    chat_id: int | str | None,
) -> None:
    """`asks.mark_rung`, with the urgent rings the message carried remembered."""
    if chat_id is not None and telegram_message_id is not None:
        remember(conn, seqs, chat_id, telegram_message_id)
    asks.mark_rung(conn, seqs, outbox_ids, telegram_message_id, chat_id)


def settle_answer(
    conn: sqlite3.Connection, answer_key: str, outcome: str, detail: str, settled_line: Any
) -> tuple[answers.Answer | None, bool]:
    """`answers.settle`, and when it settled the ask (answered from the phone), the urgent
    reports of that ask acknowledged."""
    answer, edits = answers.settle(conn, answer_key, outcome, detail, settled_line)
    if answer is not None and asks.settled_text(conn, answer.ask_key) is not None:
        acknowledge_ask(conn, answer.ask_key)
    return answer, edits


def head(conn: sqlite3.Connection, limit: int, now: float) -> list[telegram.QueuedRing]:
    """`asks.head`, each urgent entry with its live "Got it" token (none once it stopped)."""
    entries = asks.head(conn, limit, now)
    keys = [entry.urgent for entry in entries if entry.urgent is not None]
    if not keys:
        return entries
    marks = ", ".join("?" * len(keys))
    tokens = dict(
        conn.execute(
            f"SELECT urgent_key, token FROM urgent_reports WHERE urgent_key IN ({marks}) "
            "AND acked_at IS NULL AND expired_at IS NULL",
            keys,
        ).fetchall()
    )
    return [
        replace(entry, got_it=tokens.get(entry.urgent)) if entry.urgent is not None else entry
        for entry in entries
    ]


# -- the schedule (the nag task's source) ------------------------------------------------------


def ring_due(
    conn: sqlite3.Connection, now: float, bounds: UrgentBounds, second_chat: str | None = None
) -> DueTurn:
    """ONE transaction's statements (the caller's `write`): schedule the reports the nag task
    has not seen yet, queue one repeat of each report due by `now` (none while a ring of it is
    still queued: the phone is not flooded behind an outage), climb to rung 2 each report
    nobody acknowledged within `bounds.escalate_s` when a second person's chat is paired
    (`second_chat`), expire the ones past their expiry, and move each schedule on. A restart
    after the commit never queues one due time twice; one before it queued nothing."""
    conn.execute(
        "UPDATE urgent_reports SET next_at = MIN(created_at + ?, created_at + ?), "
        "expires_at = created_at + ? "
        "WHERE expires_at IS NULL AND acked_at IS NULL AND expired_at IS NULL",
        (bounds.rering_s, bounds.expire_s, bounds.expire_s),
    )
    escalated = _climb(conn, now, bounds, second_chat)
    due = [
        _row(raw)
        for raw in conn.execute(
            f"SELECT {_COLUMNS} FROM urgent_reports WHERE next_at <= ? ORDER BY next_at", (now,)
        ).fetchall()
    ]
    queued = 0
    expired: list[Stopped] = []
    for row in due:
        if row.expires_at is not None and now >= row.expires_at:
            expired.append(_expire(conn, row, now))
        else:
            queued += _repeat(conn, row, now, bounds)
    return DueTurn(queued + len(escalated), expired, next_due(conn), escalated)


def _climb(
    conn: sqlite3.Connection, now: float, bounds: UrgentBounds, second_chat: str | None
) -> list[str]:
    """Rung 2: schedule it for the reports still on rung 1 (none without a second person),
    then queue the ring in the second person's chat of each one due by `now` (before its
    expiry), moving it to rung 2 in the same transaction. The keys that climbed."""
    if second_chat is None:
        conn.execute(
            "UPDATE urgent_reports SET escalate_at = NULL WHERE escalate_at IS NOT NULL "
            "AND rung < ?",
            (SECOND_RUNG,),
        )
        return []
    conn.execute(
        "UPDATE urgent_reports SET escalate_at = created_at + ? WHERE escalate_at IS NULL "
        "AND rung < ? AND acked_at IS NULL AND expired_at IS NULL",
        (bounds.escalate_s, SECOND_RUNG),
    )
    due = [
        _row(raw)
        for raw in conn.execute(
            f"SELECT {_COLUMNS} FROM urgent_reports WHERE escalate_at <= ? "
            "AND (expires_at IS NULL OR expires_at > ?) ORDER BY escalate_at",
            (now, now),
        ).fetchall()
    ]
    for row in due:
        text = escalated_text(row.created_at, now, row.report)[:MAX_TEXT_CHARS]
        telegram.insert_telegram(conn, None, text, urgent=row.key, chat=second_chat)
        conn.execute(
            "UPDATE urgent_reports SET rung = ?, escalate_at = NULL WHERE urgent_key = ?",
            (SECOND_RUNG, row.key),
        )
    return [row.key for row in due]


def _repeat(conn: sqlite3.Connection, row: UrgentRow, now: float, bounds: UrgentBounds) -> int:
    """Queue the repeat of `row` due now (unless a ring of it is still queued) and move its
    schedule one interval on, at most to its expiry. How many entries were queued."""
    assert row.expires_at is not None
    next_at = min(now + bounds.rering_s, row.expires_at)
    if telegram.queued_urgent(conn, row.key):
        conn.execute(
            "UPDATE urgent_reports SET next_at = ? WHERE urgent_key = ?", (next_at, row.key)
        )
        return 0
    ring = row.rings + 1
    text = repeat_text(ring, row.created_at, now, row.report)[:MAX_TEXT_CHARS]
    telegram.insert_telegram(conn, None, text, row.ask_key, urgent=row.key)
    conn.execute(
        "UPDATE urgent_reports SET rings = ?, next_at = ? WHERE urgent_key = ?",
        (ring, next_at, row.key),
    )
    return 1


def _expire(conn: sqlite3.Connection, row: UrgentRow, now: float, why: str = "") -> Stopped:
    conn.execute(
        "UPDATE urgent_reports SET expired_at = ?, next_at = NULL, escalate_at = NULL "
        "WHERE urgent_key = ?",
        (now, row.key),
    )
    rung = _rung(conn, row.key)
    line = expired_line(rung, row.created_at, now, row.report, why)
    return _stop(conn, row, line, EXPIRED_SOURCE_SUFFIX, "stopped ringing: unacknowledged")


def next_due(conn: sqlite3.Connection) -> float | None:
    """The earliest due time of any urgent report (a repeat, a rung, an expiry); None: none
    rings."""
    (at,) = conn.execute(
        "SELECT MIN(at) FROM (SELECT MIN(next_at) AS at FROM urgent_reports "
        "UNION ALL SELECT MIN(escalate_at) FROM urgent_reports)"
    ).fetchone()
    return None if at is None else float(at)


def _rung(conn: sqlite3.Connection, key: str) -> int:
    """How many messages rang the report (what the owner's phone showed)."""
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM urgent_messages WHERE urgent_key = ?", (key,)
    ).fetchone()
    return int(count)


def _stop(conn: sqlite3.Connection, row: UrgentRow, line: str, suffix: str, note: str) -> Stopped:
    """The report stopped (acknowledged or expired): its repeats not sent yet dropped, its live
    "Got it" removed from the phone (a request keeps its choices: its settle edits it), and its
    Chief line written as a report row, in the caller's transaction."""
    telegram.drop_urgent(conn, row.key)
    # A request's own messages keep their choices (its settle edits them); every other ring
    # (rung 2's included: it carries "Got it" alone) loses its button now.
    _unbutton(conn, row.key, None, note, only_rung=None if row.ask_key is None else SECOND_RUNG)
    # The row's own report is `coop-notify:<outbox id>` (chief.conversation); its lines follow.
    source_id = "coop-notify:" + row.key + suffix
    reports.queue_line(conn, row.chief_id, report_key(source_id), line)
    return Stopped(row.key, line, source_id)


def _unbutton(
    conn: sqlite3.Connection,
    key: str,
    keep: int | None,
    note: str,
    *,
    chat: int | str | None = None,
    only_rung: int | None = None,
) -> None:
    """Queue the edit of each live message of `key` but `keep` (a message id), in `chat` only
    when given, of `only_rung` only when given: its text plus `note`, its buttons removed."""
    rows = conn.execute(
        "SELECT chat_id, message_id, text, sent_at, rung FROM urgent_messages "
        "WHERE urgent_key = ? AND live = 1",
        (key,),
    ).fetchall()
    for chat_id, message_id, text, sent_at, rung in rows:
        if message_id == keep and (chat is None or str(chat_id) == str(chat)):
            continue
        if chat is not None and str(chat_id) != str(chat):
            continue
        if only_rung is not None and rung != only_rung:
            continue
        conn.execute(
            "UPDATE urgent_messages SET live = 0 WHERE chat_id = ? AND message_id = ?",
            (chat_id, message_id),
        )
        message = asks.AskMessage(chat_id, int(message_id), str(text), str(sent_at))
        asks.queue_edit(conn, (key, 0), message, note)


# -- the sent mark ---------------------------------------------------------------------------


def remember(
    conn: sqlite3.Connection, seqs: list[int], chat_id: int | str, message_id: int
) -> None:
    """The urgent entries among `seqs` rang as (chat_id, message_id): remembered against their
    report, and every older message of it loses its "Got it" (an edit queued); a ring that went
    out after the report stopped loses its own at once. One live "Got it" per chat: the
    owner's repeats leave rung 2's message in the second person's chat as it is."""
    for key, text, rung in telegram.ladder_entries(conn, seqs):
        (ring,) = conn.execute(
            "SELECT COUNT(*) + 1 FROM urgent_messages WHERE urgent_key = ?", (key,)
        ).fetchone()
        conn.execute(
            "INSERT OR REPLACE INTO urgent_messages (chat_id, message_id, urgent_key, ring, "
            "text, live, sent_at, rung) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
            (chat_id, message_id, key, int(ring), text, utc_now(), rung),
        )
        stopped = conn.execute(
            "SELECT acked_at IS NOT NULL OR expired_at IS NOT NULL, ask_key FROM urgent_reports "
            "WHERE urgent_key = ?",
            (key,),
        ).fetchone()
        if stopped is not None and stopped[0] and (stopped[1] is None or rung == SECOND_RUNG):
            _unbutton(conn, key, None, "stopped ringing", chat=chat_id)
        else:
            _unbutton(conn, key, message_id, RUNG_AGAIN_NOTE, chat=chat_id)


# -- acknowledgements --------------------------------------------------------------------------


def acknowledge_token(
    conn: sqlite3.Connection, token: str, now: float, by: str = OWNER
) -> Acked | None:
    """A tap on "Got it" by `by` (a key of `WHO`): the report acknowledged (once); None for a
    token never minted here."""
    raw = conn.execute(
        f"SELECT {_COLUMNS} FROM urgent_reports WHERE token = ?", (token,)
    ).fetchone()
    return None if raw is None else _acknowledge(conn, _row(raw), "got_it", now, by)


def acknowledge_key(conn: sqlite3.Connection, key: str, now: float, by: str) -> Acked | None:
    """The report `key` acknowledged by `by` (a key of `WHO`) from anywhere but a message (a
    further rung's own path, `chief ack`): once; None for a key of no urgent report."""
    raw = conn.execute(
        f"SELECT {_COLUMNS} FROM urgent_reports WHERE urgent_key = ?", (key,)
    ).fetchone()
    via = None if by == MACHINE else "got_it"
    return None if raw is None else _acknowledge(conn, _row(raw), via, now, by)


def key_of(conn: sqlite3.Connection, reference: str) -> str | None:
    """The urgent key `reference` names: a report's number (what `chief ack N` takes, shown by
    the status) or its key; None when it names none."""
    if reference.isascii() and reference.isdigit():
        row = conn.execute(
            "SELECT urgent_key FROM urgent_reports WHERE rowid = ?", (int(reference),)
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT urgent_key FROM urgent_reports WHERE urgent_key = ?", (reference,)
        ).fetchone()
    return None if row is None else str(row[0])


def ringing(conn: sqlite3.Connection) -> list[Ringing]:
    """The urgent reports still ringing (nobody acknowledged them, none expired), oldest first,
    with their number, text and rung: what a further rung looks at."""
    return [
        Ringing(str(key), int(number), str(text), int(rung), float(created))
        for key, number, text, rung, created in conn.execute(
            "SELECT urgent_key, rowid, text, rung, created_at FROM urgent_reports "
            "WHERE acked_at IS NULL AND expired_at IS NULL ORDER BY created_at"
        )
    ]


def reach_rung(conn: sqlite3.Connection, key: str, rung: int) -> bool:
    """Record that the report `key`, still ringing, reached `rung`: True once, when it was
    below it (the caller queues that rung's send in the same transaction), else False."""
    cursor = conn.execute(
        "UPDATE urgent_reports SET rung = ? WHERE urgent_key = ? AND rung < ? "
        "AND acked_at IS NULL AND expired_at IS NULL",
        (rung, key, rung),
    )
    return cursor.rowcount == 1


def acknowledge_message(
    conn: sqlite3.Connection, chat_id: int, message_id: int, now: float, by: str = OWNER
) -> Acked | None:
    """A reply by `by` to one of an urgent report's messages: acknowledged (once); None when
    that message rang no urgent report."""
    raw = conn.execute(
        f"SELECT {', '.join('r.' + c.strip() for c in _COLUMNS.split(','))} "
        "FROM urgent_messages m JOIN urgent_reports r ON r.urgent_key = m.urgent_key "
        "WHERE m.chat_id = ? AND m.message_id = ?",
        (chat_id, message_id),
    ).fetchone()
    return None if raw is None else _acknowledge(conn, _row(raw), "reply", now, by)


def acknowledge_ask(conn: sqlite3.Connection, ask_key: str) -> list[Stopped]:
    """The request of an urgent ask was settled (answered from the phone, or closed anyhow):
    every urgent report of that ask acknowledged, in the caller's transaction."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM urgent_reports WHERE ask_key = ? AND acked_at IS NULL",
        (ask_key,),
    ).fetchall()
    now = time.time()
    stopped = [_acknowledge(conn, _row(raw), "settled", now, SETTLE).stopped for raw in rows]
    return [stop for stop in stopped if stop is not None]


def expire_ask(conn: sqlite3.Connection, ask_key: str) -> list[Stopped]:
    """The request of an urgent ask was decided by its deadline: nobody answered it, so each
    urgent report of that ask still ringing stops as gone unacknowledged (its expiry line says
    why; the status and `coop status --check` name it), never as acknowledged. One already
    stopped is left as it is."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM urgent_reports WHERE ask_key = ? AND acked_at IS NULL "
        "AND expired_at IS NULL",
        (ask_key,),
    ).fetchall()
    now = time.time()
    return [_expire(conn, _row(raw), now, DEADLINE_DECIDED) for raw in rows]


def _acknowledge(
    conn: sqlite3.Connection, row: UrgentRow, via: str | None, now: float, by: str
) -> Acked:
    (acked_at,) = conn.execute(
        "SELECT acked_at FROM urgent_reports WHERE urgent_key = ?", (row.key,)
    ).fetchone()
    if acked_at is not None:
        return Acked(float(acked_at), None)
    conn.execute(
        "UPDATE urgent_reports SET acked_at = ?, acked_via = ?, acked_by = ?, next_at = NULL, "
        "escalate_at = NULL WHERE urgent_key = ?",
        (now, via, by, row.key),
    )
    line = acknowledged_line(now, _rung(conn, row.key), row.report, by=by)
    note = line.partition("): ")[0] + ")"  # "acknowledged at 14:05 by the owner (after 3 rings)"
    return Acked(now, _stop(conn, row, line, ACK_SOURCE_SUFFIX, note))


# -- what an operator sees ---------------------------------------------------------------------


@dataclass(frozen=True)
class UrgentStatus:
    ringing: list[dict[str, object]]
    acknowledged: int
    expired_unacknowledged: list[dict[str, object]]


def status(conn: sqlite3.Connection, now: float) -> UrgentStatus:
    """The reports still ringing (their next repeat and expiry), the count acknowledged, and the
    expiries the owner never acknowledged within EXPIRED_SHOWN_S; each list at most
    STATUS_LIMIT long."""
    ringing = [
        {"key": key, "number": number, "text": text, "rings": rings, "next_at": next_at,
         "expires_at": expires, "rung": rung, "escalate_at": escalate_at}
        for key, number, text, rings, next_at, expires, rung, escalate_at in conn.execute(
            "SELECT urgent_key, rowid, text, rings, next_at, expires_at, rung, escalate_at "
            "FROM urgent_reports WHERE acked_at IS NULL AND expired_at IS NULL "
            "ORDER BY created_at LIMIT ?",
            (STATUS_LIMIT,),
        )
    ]  # fmt: skip
    (acknowledged,) = conn.execute(
        "SELECT COUNT(*) FROM urgent_reports WHERE acked_at IS NOT NULL"
    ).fetchone()
    expired = [
        {"key": key, "text": text, "expired_at": at, "rung": rung}
        for key, text, at, rung in conn.execute(
            "SELECT urgent_key, text, expired_at, rung FROM urgent_reports WHERE acked_at IS NULL "
            "AND expired_at >= ? ORDER BY expired_at DESC LIMIT ?",
            (now - EXPIRED_SHOWN_S, STATUS_LIMIT),
        )
    ]
    return UrgentStatus(ringing, int(acknowledged), expired)
