"""The conversation's tables: the Master Chiefs (`chiefs`), their messages (`messages`) and the
report outbox (`chief_report_outbox`). Every function runs on the store's connection thread,
inside the caller's transaction unless it says otherwise."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from chief.model import NO_EXTRAS, Extras, Message
from chief.reminder_rules import Deadline, with_deadline
from chief.store import asks
from chief.store.sql import found, utc_now, write
from chief.store.telegram import entries_ahead, insert_telegram
from plumbing.faults import fault

MESSAGE_COLUMNS = "id, role, content, turn_kind, origin, external_request_id, created_at"


def resolve_chief(conn: sqlite3.Connection, owner: str) -> int:
    conn.execute(
        "INSERT INTO chiefs (owner, created_at) VALUES (?, ?) ON CONFLICT (owner) DO NOTHING",
        (owner, utc_now()),
    )
    (chief_id,) = conn.execute("SELECT id FROM chiefs WHERE owner = ?", (owner,)).fetchone()
    return int(chief_id)


def owners(conn: sqlite3.Connection) -> list[str]:
    return [str(row[0]) for row in conn.execute("SELECT owner FROM chiefs ORDER BY id")]


@dataclass(frozen=True)
class ReportRow:
    """One report to accept: its key, its text, the Coop outbox id it rings for (a notify row;
    None for a cron line), the conversation it came from, when known, and a notify row's
    extras (an ask, a settle, no ring)."""

    key: str
    text: str
    outbox_id: str | None = None
    source_conversation_id: str | None = None
    extras: Extras = NO_EXTRAS


@dataclass(frozen=True)
class Accepted:
    """What the accept transaction found and wrote for one report row."""

    message_id: int | None  # the key's message, when it had landed before this transaction
    already_sent: bool = False  # its outbox id was already in coop_notify_sent
    telegram_message_id: int | None = None  # the message that carried the outbox id, when sent
    telegram_seq: int | None = None  # its Telegram queue entry, when queued (now or before)
    telegram_ahead: int = 0  # Telegram entries queued before it


def accept(
    conn: sqlite3.Connection, chief_id: int, rows: list[ReportRow], queue_telegram: bool
) -> list[Accepted]:
    """The accept transaction's statements (the caller's `write`), for every row in order: the
    report row of a key not landed yet and, with `queue_telegram`, the Telegram entry of an
    outbox id not rung yet (reused when queued already; none for a row that asks not to ring;
    an ask's with its buttons), and a settle's voided buttons and queued edits
    (`chief.store.asks`). A failure at any row rolls back every
    row before it: none is half-recorded.

    The reads are done once for the whole list (the rows' keys and outbox ids are distinct, so no
    row's writes change another row's reads), so per row that is two statements at most (the
    report row, the Telegram entry): the sent marks, the landed lines and the queued entries are
    each one `IN (...)` read, and the entries ahead of each queued one are one read of the queue
    from the first."""
    outbox_ids = [row.outbox_id for row in rows if row.outbox_id is not None]
    sent = found(conn, "SELECT outbox_id, telegram_message_id FROM coop_notify_sent", outbox_ids)
    landed = found(
        conn,
        "SELECT external_request_id, id FROM messages",
        [row.key for row in rows],
        "external_request_id",
    )
    ring = [
        row.outbox_id
        for row in rows
        if queue_telegram and row.extras.ring and row.outbox_id is not None
        if row.outbox_id not in sent
    ]
    queued = found(conn, "SELECT outbox_id, seq FROM telegram_queue", ring)
    seqs: list[int | None] = []
    for index, row in enumerate(rows):
        if index:
            fault("chief.store.batch_next_row")  # test-only: a failure part-way through a batch
        if row.key not in landed:
            _insert_report(conn, chief_id, row)
        seq = None
        if row.outbox_id in ring:
            seq = queued.get(row.outbox_id)
            if seq is None:
                seq = _insert_entry(conn, row)
        if (settles := row.extras.settles) is not None:
            decided = None if settles.by is None else (settles.by, settles.outcome, settles.choice)
            asks.settle(conn, settles.key, row.text, decided)
        if (amends := row.extras.amends) is not None and row.key not in landed:
            # Once per row: its Chief line lands in this transaction, so a retry finds it.
            asks.amend(conn, amends.key, row.text)
        seqs.append(None if seq is None else int(seq))
    # A settle takes an unsent ask of its own off the queue: that entry is no longer there.
    ahead = entries_ahead(conn, [seq for seq in seqs if seq is not None])
    seqs = [seq if seq in ahead else None for seq in seqs]
    return [_accepted(row, landed, sent, seq, ahead) for row, seq in zip(rows, seqs, strict=True)]


def _insert_entry(conn: sqlite3.Connection, row: ReportRow) -> int | None:
    """The Telegram entry of a row to ring: an ask's names its ask key (its buttons live);
    an ask its settle voided before it rang gets none; an urgent row's names its urgent key
    (the outbox id: `chief.store.urgent.accept` records it to ring again)."""
    ask = row.extras.ask
    key = row.outbox_id if row.extras.urgent else None
    if ask is not None and not asks.open_ask(conn, ask, row.outbox_id):
        return None
    if ask is None:
        return insert_telegram(conn, row.outbox_id, row.text, urgent=key)
    deadline = None if ask.deadline_at is None else Deadline(ask.deadline_at, ask.default)
    text = with_deadline(row.text, deadline, time.time())  # the door's local time
    return insert_telegram(conn, row.outbox_id, text, ask.key, urgent=key)


def queue_line(conn: sqlite3.Connection, chief_id: int, key: str, text: str) -> None:
    """A line the door itself reports (an urgent report acknowledged or expired) under `key`,
    queued to land; once per key."""
    _insert_report(conn, chief_id, ReportRow(key, text))


def _accepted(
    row: ReportRow,
    landed: dict[str, int],
    sent: dict[str, int | None],
    seq: int | None,
    ahead: dict[int, int],
) -> Accepted:
    landed_id = landed.get(row.key)
    sent_id = None if row.outbox_id is None else sent.get(row.outbox_id)
    return Accepted(
        None if landed_id is None else int(landed_id),
        row.outbox_id is not None and row.outbox_id in sent,
        None if sent_id is None else int(sent_id),
        seq,
        0 if seq is None else ahead[seq],
    )


def _insert_report(conn: sqlite3.Connection, chief_id: int, row: ReportRow) -> None:
    """The report row of a key not landed yet. A key already queued is ignored, so the first
    text reported under a key is the one that lands."""
    fault("chief.store.enqueue_report")  # test-only: a full disk under the report's insert
    conn.execute(
        "INSERT OR IGNORE INTO chief_report_outbox "
        "(source_key, chief_id, text, source_conversation_id, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (row.key, chief_id, row.text, row.source_conversation_id, utc_now()),
    )


def land(
    conn: sqlite3.Connection, chief_id: int, turn_kind_of: Callable[[str], str], limit: int
) -> tuple[list[tuple[str, int]], bool]:
    """The landing transaction (its own `write`), committed with synchronous=NORMAL (see
    Durability in chief.store)."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        return write(conn, _land_undelivered, chief_id, turn_kind_of, limit)
    finally:
        conn.execute("PRAGMA synchronous = FULL")


def _land_undelivered(
    conn: sqlite3.Connection, chief_id: int, turn_kind_of: Callable[[str], str], limit: int
) -> tuple[list[tuple[str, int]], bool]:
    rows = conn.execute(
        "SELECT source_key, text FROM chief_report_outbox "
        "WHERE chief_id = ? AND message_id IS NULL ORDER BY rowid LIMIT ?",
        (chief_id, limit),
    ).fetchall()
    if not rows:
        return [], False
    now = utc_now()
    # One statement per table for the whole landing, in outbox order (the message ids follow
    # it), not two per row.
    conn.executemany(
        "INSERT INTO messages (chief_id, role, content, turn_kind, origin, "
        "external_request_id, created_at) "
        "VALUES (?, 'assistant', ?, ?, 'scheduled_task', ?, ?) "
        "ON CONFLICT (external_request_id) DO NOTHING",
        [(chief_id, text, turn_kind_of(key), key, now) for key, text in rows],
    )
    # The ids read back by key: a key whose message already existed without its outbox record
    # (written by hand; the insert did nothing) adopts that message rather than wedge the
    # queue on a UNIQUE error.
    keys = [str(key) for key, _ in rows]
    ids = found(conn, "SELECT external_request_id, id FROM messages", keys, "external_request_id")
    fault("chief.store.land_report")  # test-only: a full disk between the landing's writes
    conn.executemany(
        "UPDATE chief_report_outbox SET message_id = ?, landed_at = ? WHERE source_key = ?",
        [(ids[key], now, key) for key in keys],
    )
    return [(key, int(ids[key])) for key in keys], len(rows) == limit


def append_message(
    conn: sqlite3.Connection, chief_id: int, role: str, content: str, turn_kind: str, origin: str
) -> int:
    cursor = conn.execute(
        "INSERT INTO messages (chief_id, role, content, turn_kind, origin, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (chief_id, role, content, turn_kind, origin, utc_now()),
    )
    return int(cursor.lastrowid or 0)


def recent_messages(conn: sqlite3.Connection, chief_id: int, limit: int) -> list[Message]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE chief_id = ? ORDER BY id DESC LIMIT ?",
        (chief_id, limit),
    ).fetchall()
    return [Message(*row) for row in reversed(rows)]
