"""The door's phone tables: `telegram_inbox` (one row: the next getUpdates offset and the
owner's /quiet override) and `telegram_strangers` (senders the door does not obey, one row
each, so each is logged once, across restarts). Every function runs on the store's connection
thread, inside the caller's transaction unless it says otherwise."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from chief.store.sql import utc_now

# The most strangers remembered; past it the one seen longest ago is forgotten (a flood of
# senders must not grow chief.db without bound; a forgotten one is logged again if it returns).
MAX_STRANGERS = 1000


@dataclass(frozen=True)
class InboxState:
    """What the phone reads at its start."""

    next_offset: int | None  # None: no update handled yet
    quiet_until: float | None  # unix seconds; None: no /quiet override


def state(conn: sqlite3.Connection) -> InboxState:
    row = conn.execute(
        "SELECT next_offset, quiet_until FROM telegram_inbox WHERE id = 1"
    ).fetchone()
    if row is None:
        return InboxState(None, None)
    offset, quiet = row
    return InboxState(
        None if offset is None else int(offset), None if quiet is None else float(quiet)
    )


def commit_offset(conn: sqlite3.Connection, next_offset: int) -> None:
    """Record that every update below `next_offset` was handled (the offset never goes back)."""
    conn.execute(
        "UPDATE telegram_inbox SET next_offset = MAX(COALESCE(next_offset, 0), ?) WHERE id = 1",
        (next_offset,),
    )


def set_quiet_until(conn: sqlite3.Connection, until: float | None) -> None:
    conn.execute("UPDATE telegram_inbox SET quiet_until = ? WHERE id = 1", (until,))


def note_stranger(
    conn: sqlite3.Connection, sender_id: int, chat_id: int | None, next_offset: int
) -> bool:
    """Count an update from a stranger and commit the offset past it, together; True when this
    sender was not remembered (the caller logs it once)."""
    now = utc_now()
    known = conn.execute(
        "UPDATE telegram_strangers SET updates = updates + 1, last_seen_at = ?, chat_id = ? "
        "WHERE sender_id = ?",
        (now, chat_id, sender_id),
    ).rowcount
    if not known:
        conn.execute(
            "INSERT INTO telegram_strangers (sender_id, chat_id, updates, first_seen_at, "
            "last_seen_at) VALUES (?, ?, 1, ?, ?)",
            (sender_id, chat_id, now, now),
        )
        conn.execute(
            "DELETE FROM telegram_strangers WHERE sender_id IN (SELECT sender_id FROM "
            "telegram_strangers ORDER BY last_seen_at DESC, sender_id LIMIT -1 OFFSET ?)",
            (MAX_STRANGERS,),
        )
    commit_offset(conn, next_offset)
    return not known
