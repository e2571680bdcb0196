"""An ask's reminders (issue 28): the schedule, one row per ask rung with `remind`
(`ask_reminders`; every statement on it is here).

    schedule   in the transaction of the ask's first sent mark (`chief.store.asks.remember`):
               the first reminder due `every_s` after it rang, the ask's first message kept
               (each reminder is a reply to it); none when the first would fall at or after
               the deadline
    ring_due   ONE transaction: the reminders due by `now`, each ruled by the caller's `plan`
               (`chief.phone.reminders`): queued on the Telegram queue as an entry of the ask
               (its live buttons, a reply to its first message) with the schedule moved on
               in the same transaction, or held (quiet hours, the owner's /quiet) until a
               later time (and looked at again at every turn, so a /quiet ended early lets it
               ring at once), or ended. A restart never queues one due time twice: the due time
               and the entry commit together
    end        the ask was settled (`chief.store.asks.void_ask`, in the settle's transaction):
               the schedule ends; a reminder already queued and not yet sent is dropped there
               with the ask's other entries (`chief.store.telegram.drop_void_asks`)

Every function runs on the store's connection thread, inside the caller's transaction. The
queue's own statements stay in `chief.store.telegram`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from chief.reminder_rules import Deadline, DueReminder, next_due
from chief.store import telegram
from chief.store.sql import utc_now

# How many due reminders one transaction takes; the rest are due at once in the next turn.
DUE_BATCH = 64


@dataclass(frozen=True)
class Ring:
    """Queue the reminder (`text`); its next falls due at `next_at` (None: it was the last)."""

    text: str
    next_at: float | None


@dataclass(frozen=True)
class Hold:
    """Not now (quiet hours, the owner's /quiet): due again at `until`, and looked at again
    at every turn meanwhile when `recheck` (the quiet may end sooner)."""

    until: float
    recheck: bool = True


@dataclass(frozen=True)
class End:
    """No more reminders for this ask (`reason`: the deadline came)."""

    reason: str


Step = Ring | Hold | End
Plan = Callable[[DueReminder], Step]


@dataclass(frozen=True)
class NextReminder:
    """The schedule's earliest due reminder."""

    request_id: int
    ask_key: str
    due_at: float


def schedule(
    conn: sqlite3.Connection, ask_key: str, chat_id: int | str, message_id: int, now: float
) -> bool:
    """The ask `ask_key` rang as (chat_id, message_id) at `now`: its reminders' schedule made,
    when it asks for reminders and has none yet (its first ring only). Whether a reminder now
    falls due."""
    row = conn.execute(
        "SELECT request_id, title, remind_every_s, remind_max, deadline_at FROM asks "
        "WHERE ask_key = ? AND voided_at IS NULL AND remind_every_s IS NOT NULL",
        (ask_key,),
    ).fetchone()
    if row is None:
        return False
    request_id, title, every_s, max_rings, deadline_at = row
    next_at = next_due(0, int(max_rings), now, float(every_s), deadline_at)
    cursor = conn.execute(
        "INSERT OR IGNORE INTO ask_reminders (ask_key, request_id, title, every_s, max_rings, "
        "deadline_at, chat_id, first_message_id, first_rang_at, next_at, ended_at, end_reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ask_key, request_id, title, every_s, max_rings, deadline_at, chat_id, message_id, now,
         next_at, None if next_at is not None else utc_now(),
         None if next_at is not None else "deadline"),
    )  # fmt: skip
    return cursor.rowcount == 1 and next_at is not None


def ring_due(conn: sqlite3.Connection, now: float, plan: Plan) -> tuple[int, float | None]:
    """The reminders due by `now`, each as `plan` rules it (see the module docstring), in one
    transaction: how many were queued, and when the next falls due (None: nothing scheduled)."""
    rows = conn.execute(
        "SELECT r.ask_key, r.request_id, r.title, r.rung, r.max_rings, r.every_s, "
        "r.first_rang_at, COALESCE(r.held_due_at, r.next_at), r.deadline_at, a.default_choice, "
        "r.first_message_id, EXISTS (SELECT 1 FROM telegram_queue q WHERE q.ask_key = r.ask_key) "
        "FROM ask_reminders r JOIN asks a ON a.ask_key = r.ask_key "
        "WHERE r.next_at IS NOT NULL AND (r.next_at <= ? OR r.held_due_at IS NOT NULL) "
        "ORDER BY r.next_at LIMIT ?",
        (now, DUE_BATCH),
    ).fetchall()
    queued = 0
    for row in rows:
        key, request, title, rung, most, every, first, due_at, deadline_at, default = row[:10]
        reply, queued_yet = int(row[10]), bool(row[11])
        deadline = None if deadline_at is None else Deadline(float(deadline_at), default)
        due = DueReminder(
            str(key), int(request), str(title), int(rung) + 1, int(most), float(every),
            float(first), float(due_at), deadline, queued_yet,
        )  # fmt: skip
        step = plan(due)
        if isinstance(step, Ring):
            telegram.insert_telegram(conn, None, step.text, due.ask_key, reply)
            _move(conn, due.ask_key, step.next_at, rung=1, reason="rung all")
            queued += 1
        elif isinstance(step, Hold):
            conn.execute(
                "UPDATE ask_reminders SET next_at = ?, held_due_at = ? WHERE ask_key = ?",
                (step.until, due.due_at if step.recheck else None, due.ask_key),
            )
        else:
            end(conn, due.ask_key, step.reason)
    telegram.drop_stale_reminders(conn, now)
    return queued, next_at(conn)


def _move(
    conn: sqlite3.Connection, ask_key: str, next_at: float | None, *, rung: int, reason: str
) -> None:
    """The schedule moved on to `next_at` (None: ended, for `reason`), `rung` more rung."""
    conn.execute(
        "UPDATE ask_reminders SET rung = rung + ?, next_at = ?, held_due_at = NULL, "
        "ended_at = ?, end_reason = ? WHERE ask_key = ?",
        (rung, next_at, None if next_at is not None else utc_now(),
         None if next_at is not None else reason, ask_key),
    )  # fmt: skip


def end(conn: sqlite3.Connection, ask_key: str, reason: str) -> None:
    """No more reminders for the ask (settled, or its deadline came). Idempotent."""
    conn.execute(
        "UPDATE ask_reminders SET next_at = NULL, held_due_at = NULL, ended_at = ?, "
        "end_reason = ? WHERE ask_key = ? AND next_at IS NOT NULL",
        (utc_now(), reason, ask_key),
    )


def next_at(conn: sqlite3.Connection) -> float | None:
    """When the earliest scheduled reminder falls due (epoch seconds), or None."""
    (at,) = conn.execute("SELECT MIN(next_at) FROM ask_reminders").fetchone()
    return None if at is None else float(at)


def status(conn: sqlite3.Connection) -> tuple[int, NextReminder | None]:
    """How many asks have a reminder scheduled, and the earliest of them."""
    (scheduled,) = conn.execute(
        "SELECT COUNT(*) FROM ask_reminders WHERE next_at IS NOT NULL"
    ).fetchone()
    row = conn.execute(
        "SELECT request_id, ask_key, next_at FROM ask_reminders WHERE next_at IS NOT NULL "
        "ORDER BY next_at LIMIT 1"
    ).fetchone()
    soonest = None if row is None else NextReminder(int(row[0]), str(row[1]), float(row[2]))
    return int(scheduled), soonest


def rung_count(conn: sqlite3.Connection, ask_key: str) -> int:
    """How many reminders of the ask were queued so far."""
    row = conn.execute("SELECT rung FROM ask_reminders WHERE ask_key = ?", (ask_key,)).fetchone()
    return 0 if row is None else int(row[0])
