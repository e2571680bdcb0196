"""The door's phone tables: `telegram_inbox` (one row: the id of the last update handled and
the owner's /quiet override), `telegram_updates_seen` (the keys of the updates handled, the
most recent MAX_SEEN kept, so a replay is applied once) and `telegram_strangers` (senders the
door does not obey, one row each, so a new one is told apart from one seen before, across
restarts). Every function runs on the store's connection thread, inside the caller's
transaction unless it says otherwise.

No id filters anything here: Telegram's update ids restart and repeat, so an update is known by
its key (`chief.telegram.update_key`: its id and a digest of its content).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from chief.store.sql import utc_now

# The most updates remembered as handled, the oldest forgotten first. Telegram delivers an update
# again only while it is unconfirmed, at most one getUpdates batch (100) after a crash; ten
# batches' worth keeps every replay harmless at a few hundred kB of chief.db.
MAX_SEEN = 1000
# The most strangers remembered; past it the one seen longest ago is forgotten (a flood of
# senders must not grow chief.db without bound; a forgotten one counts as new again if it returns).
MAX_STRANGERS = 1000


@dataclass(frozen=True)
class InboxState:
    """What the phone reads at its start."""

    last_update_id: int | None  # the last update handled (None: none yet); filters nothing
    quiet_until: float | None  # unix seconds; None: no /quiet override


def state(conn: sqlite3.Connection) -> InboxState:
    row = conn.execute(
        "SELECT last_update_id, quiet_until FROM telegram_inbox WHERE id = 1"
    ).fetchone()
    if row is None:
        return InboxState(None, None)
    offset, quiet = row
    return InboxState(
        None if offset is None else int(offset), None if quiet is None else float(quiet)
    )


def was_handled(conn: sqlite3.Connection, update_key: str) -> bool:
    """Whether the update with this key was handled (a replay of it changes nothing)."""
    found = conn.execute(
        "SELECT 1 FROM telegram_updates_seen WHERE update_key = ?", (update_key,)
    ).fetchone()
    return found is not None


def note_handled(conn: sqlite3.Connection, update_key: str, update_id: int) -> None:
    """Record that this update was handled (its key remembered, the oldest past MAX_SEEN
    forgotten) and that its id is the last one seen."""
    conn.execute(
        "INSERT OR IGNORE INTO telegram_updates_seen (update_key, update_id, handled_at) "
        "VALUES (?, ?, ?)",
        (update_key, update_id, utc_now()),
    )
    conn.execute(
        "DELETE FROM telegram_updates_seen WHERE rowid <= "
        "(SELECT MAX(rowid) FROM telegram_updates_seen) - ?",
        (MAX_SEEN,),
    )
    conn.execute("UPDATE telegram_inbox SET last_update_id = ? WHERE id = 1", (update_id,))


def set_quiet_until(conn: sqlite3.Connection, until: float | None) -> None:
    conn.execute("UPDATE telegram_inbox SET quiet_until = ? WHERE id = 1", (until,))


def note_stranger(
    conn: sqlite3.Connection, sender_id: int, chat_id: int | None, update_key: str, update_id: int
) -> bool:
    """Count an update from a stranger and record it as handled, together; True when this
    sender was not remembered (a new stranger)."""
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
    note_handled(conn, update_key, update_id)
    return not known
