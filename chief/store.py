"""chief.db: the only module that speaks SQL.

Tables (schema version in PRAGMA user_version, migrated on open):

    chiefs               one Master Chief conversation per owner; created on first use, and a
                         trigger refuses DELETE (the conversation is never trashed)
    messages             the conversation; `external_request_id` UNIQUE is the report key
    chief_report_outbox  one row per report key; `message_id`/`landed_at` set when it lands
    coop_notify_sent     the notify door's record of which Coop outbox rows rang Telegram
    telegram_queue       what the door's sender task still has to ring, in order (seq); a row
                         is queued in the report's transaction and leaves in its sent mark's.
                         `send_id` is the in-flight record: written (FULL) before a send that
                         carries the entry, cleared when the send failed; an entry still
                         carrying one at the door's start was sent or not, nobody knows.
                         `repeat_of` names the in-doubt send the entry rings again with, as one
                         group, marked as a possible repeat
    telegram_doubts      the in-doubt events, one row per entry each carried: a send whose
                         outcome the door could not know (it died between send and mark, the
                         answer was lost, the late-reply bound passed); kept as the record an
                         operator and the proof suite compare the repeats with

Durability: WAL with synchronous=FULL, so a report the door accepted survives power loss, not
only a process crash (NORMAL would only survive the latter). One exception, the landing: its
commit runs with synchronous=NORMAL (no fsync of its own; the next FULL commit, such as the
door's sent mark a Telegram round trip later, makes it durable with everything before it). A
power cut can only lose a landing whose outbox row is durable and still reads "not landed",
so the next start lands it again, in order, once. It saves one fsync per report (~0.3 ms on
this machine's disk, and more while other writers share it).

Thread hops: one plain sqlite3 connection on one thread of its own (`chief.db_thread`, on
public APIs: a `threading.Thread`, a `queue.SimpleQueue` of calls, and the event loop's
`call_soon_threadsafe` to wake the caller's `anyio.Event`). Each use case below is ONE hop: the
whole transaction runs as one function on that thread, so no other task's statement can
interleave with it. A hop, once started, is never abandoned: a cancelled caller returns after
its transaction is over (whole), and a caller cancelled while it waits for its turn runs
nothing. Deliberate twin: `notifier.db_thread` (the packages share no code).
`report` is the door's hot path: the accept transaction (the sent-mark lookup, the report row
and, for the door, the row's Telegram queue entry: one FULL commit, so a crash right after it
still has both) and, when the caller may land it, the landing transaction all run in that one
hop. `report_batch` is the door's batch route: the accept transaction of every row of a notify
batch (all rows or none: a failure at any row rolls back the rows before it) and one landing,
still one hop. The Telegram queue's other use cases (read the head, write a send's in-flight record
before it goes out, mark a message's rows sent and take them off the queue in one transaction,
defer, record the sends in doubt) are one hop each for the sender task.
sqlite3 errors are translated into ChiefStoreError here and nowhere else.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio

from chief.db_thread import ConnectionThread
from chief.errors import ChiefStoreError
from chief.faults import fault
from chief.model import Message

T = TypeVar("T")

BUSY_TIMEOUT_S = 5.0
# Rows landed per drain transaction: bounds how long one pass holds the turn lock.
DRAIN_BATCH_ROWS = 256

# Each migration is a tuple of statements (not a script: executescript would COMMIT on its own,
# and the whole migration must sit inside the caller's BEGIN IMMEDIATE).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE chiefs (
            id INTEGER PRIMARY KEY,
            owner TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        )""",
        """CREATE TRIGGER chiefs_never_deleted BEFORE DELETE ON chiefs
        BEGIN SELECT RAISE(ABORT, 'the Master Chief conversation is never deleted'); END""",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chief_id INTEGER NOT NULL REFERENCES chiefs(id),
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system')),
            content TEXT NOT NULL,
            turn_kind TEXT NOT NULL CHECK (turn_kind IN ('chat', 'coop', 'cron')),
            origin TEXT NOT NULL CHECK (origin IN ('user', 'scheduled_task')),
            external_request_id TEXT UNIQUE,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX messages_by_chief ON messages (chief_id, id)",
        """CREATE TABLE chief_report_outbox (
            source_key TEXT PRIMARY KEY,
            chief_id INTEGER NOT NULL REFERENCES chiefs(id),
            text TEXT NOT NULL,
            source_conversation_id TEXT,
            created_at TEXT NOT NULL,
            message_id INTEGER REFERENCES messages(id),
            landed_at TEXT
        )""",
        # Undelivered rows in insertion (rowid) order: what the drainer scans.
        """CREATE INDEX chief_report_outbox_undelivered ON chief_report_outbox (chief_id)
        WHERE message_id IS NULL""",
        """CREATE TABLE coop_notify_sent (
            outbox_id TEXT PRIMARY KEY,
            telegram_message_id INTEGER,
            sent_at TEXT NOT NULL
        )""",
    ),
    (
        # The door's durable Telegram queue: what the sender task still has to ring, in order.
        # A row leaves it in the same transaction that writes its sent mark.
        """CREATE TABLE telegram_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            outbox_id TEXT UNIQUE,
            text TEXT NOT NULL,
            queued_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT
        )""",
    ),
    (
        "ALTER TABLE telegram_queue ADD COLUMN send_id TEXT",
        "ALTER TABLE telegram_queue ADD COLUMN repeat_of TEXT",
        """CREATE TABLE telegram_doubts (
            send_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            outbox_id TEXT,
            reason TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            PRIMARY KEY (send_id, seq)
        )""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)

_MESSAGE_COLUMNS = "id, role, content, turn_kind, origin, external_request_id, created_at"


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _write(conn: sqlite3.Connection, fn: Callable[..., T], *args: Any) -> T:
    """Run `fn` inside BEGIN IMMEDIATE on the connection thread; roll back unless it finishes."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: no implicit BEGINs; transactions are the explicit ones above.
    return sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def _prepare(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if str(mode).lower() != "wal":
        raise ChiefStoreError(
            f"chief.db at {path} cannot use WAL (journal mode stays {mode!r}) — put it on a local "
            "file system"
        )
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Inside BEGIN IMMEDIATE, so two processes opening a fresh file never both migrate it.
    _write(conn, _migrate, path)


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise ChiefStoreError(
            f"chief.db at {path} has schema version {version}, newer than this code's "
            f"{SCHEMA_VERSION} — upgrade coop-notifier before opening it"
        )
    for migration in MIGRATIONS[version:]:
        for statement in migration:
            conn.execute(statement)
    if version < SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _resolve_chief(conn: sqlite3.Connection, owner: str) -> int:
    conn.execute(
        "INSERT INTO chiefs (owner, created_at) VALUES (?, ?) ON CONFLICT (owner) DO NOTHING",
        (owner, _utc_now()),
    )
    (chief_id,) = conn.execute("SELECT id FROM chiefs WHERE owner = ?", (owner,)).fetchone()
    return int(chief_id)


def _enqueue_report(
    conn: sqlite3.Connection,
    chief_id: int,
    key: str,
    text: str,
    source_conversation_id: str | None,
    telegram_for: str | None,
) -> tuple[int | None, int | None]:
    """(the key's landed message id or None, the Telegram queue seq or None): the report row
    and, for `telegram_for` (an outbox id not yet rung), its Telegram entry, both INSERT OR
    IGNORE inside the caller's transaction."""
    landed = conn.execute(
        "SELECT id FROM messages WHERE external_request_id = ?", (key,)
    ).fetchone()
    if landed is None:
        _insert_report(conn, chief_id, key, text, source_conversation_id)
    seq = None if telegram_for is None else _queue_telegram(conn, telegram_for, text)
    return (None if landed is None else int(landed[0])), seq


def _insert_report(
    conn: sqlite3.Connection,
    chief_id: int,
    key: str,
    text: str,
    source_conversation_id: str | None,
) -> None:
    """The report row of a key not landed yet. A key already queued is ignored, so the first
    text reported under a key is the one that lands."""
    fault("chief.store.enqueue_report")  # test-only: a full disk under the report's insert
    conn.execute(
        "INSERT OR IGNORE INTO chief_report_outbox "
        "(source_key, chief_id, text, source_conversation_id, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (key, chief_id, text, source_conversation_id, _utc_now()),
    )


def _queue_telegram(conn: sqlite3.Connection, outbox_id: str | None, text: str) -> int:
    """The queue seq of `outbox_id`'s Telegram entry, queued now unless it is queued already."""
    if outbox_id is not None:
        found = conn.execute(
            "SELECT seq FROM telegram_queue WHERE outbox_id = ?", (outbox_id,)
        ).fetchone()
        if found is not None:
            return int(found[0])
    return _insert_telegram(conn, outbox_id, text)


def _insert_telegram(conn: sqlite3.Connection, outbox_id: str | None, text: str) -> int:
    """A new Telegram queue entry; its seq."""
    cursor = conn.execute(
        "INSERT INTO telegram_queue (outbox_id, text, queued_at) VALUES (?, ?, ?)",
        (outbox_id, text, _utc_now()),
    )
    return int(cursor.lastrowid or 0)


def _queue_telegram_alone(conn: sqlite3.Connection, text: str) -> tuple[int, int]:
    seq = _queue_telegram(conn, None, text)
    return seq, _entries_ahead(conn, [seq])[seq]


@dataclass(frozen=True)
class Reported:
    """What one `report` hop did."""

    message_id: int | None  # the key's message, when it landed (earlier or in this hop)
    already_sent: bool = False  # `sent_for` was already in coop_notify_sent
    landed: list[tuple[str, int]] = field(default_factory=list)  # (key, id) landed, in order
    more: bool = False  # the landing batch was full: more rows may wait
    land_error: str | None = None  # the landing failed and rolled back; the row stays queued
    telegram_message_id: int | None = None  # the message that carried `sent_for`, when sent
    telegram_seq: int | None = None  # its Telegram queue entry, when queued (now or before)
    telegram_ahead: int = 0  # Telegram entries queued before it


def _report(
    conn: sqlite3.Connection,
    chief_id: int,
    key: str,
    text: str,
    source_conversation_id: str | None,
    sent_for: str | None,
    queue_telegram: bool,
    land: Callable[[str], str] | None,
    limit: int,
) -> Reported:
    landed_id, sent, sent_id, seq, ahead = _write(
        conn, _enqueue_notify, chief_id, key, text, source_conversation_id, sent_for, queue_telegram
    )
    telegram: dict[str, Any] = {
        "telegram_message_id": sent_id,
        "telegram_seq": seq,
        "telegram_ahead": ahead,
    }
    if landed_id is not None:
        return Reported(landed_id, sent, **telegram)
    # The insert is committed (FULL): from here the line survives a crash.
    fault("chief.report.after_insert")
    if land is None:
        return Reported(None, sent, **telegram)
    try:
        landed, more = _land(conn, chief_id, land, limit)
    except sqlite3.Error as exc:
        return Reported(None, sent, land_error=str(exc), **telegram)
    message_id = next((found for landed_key, found in landed if landed_key == key), None)
    return Reported(message_id, sent, landed, more, **telegram)


def _enqueue_notify(
    conn: sqlite3.Connection,
    chief_id: int,
    key: str,
    text: str,
    source_conversation_id: str | None,
    sent_for: str | None,
    queue_telegram: bool,
) -> tuple[int | None, bool, int | None, int | None, int]:
    """The accept transaction: the sent mark read, the report row and the Telegram entry."""
    sent_row = None
    if sent_for is not None:
        sent_row = conn.execute(
            "SELECT telegram_message_id FROM coop_notify_sent WHERE outbox_id = ?", (sent_for,)
        ).fetchone()
    ring = sent_for if queue_telegram and sent_row is None else None
    landed_id, seq = _enqueue_report(conn, chief_id, key, text, source_conversation_id, ring)
    ahead = 0 if seq is None else _entries_ahead(conn, [seq])[seq]
    sent_id = None if sent_row is None or sent_row[0] is None else int(sent_row[0])
    return landed_id, sent_row is not None, sent_id, seq, ahead


@dataclass(frozen=True)
class NotifyRow:
    """One row of a notify batch: its report key, its text and the Coop outbox id it rings for."""

    key: str
    text: str
    outbox_id: str


@dataclass(frozen=True)
class BatchReported:
    """What one `report_batch` hop did: one `Reported` per row, in order, and the landing."""

    rows: list[Reported]
    landed: list[tuple[str, int]] = field(default_factory=list)  # (key, id) landed, in order
    more: bool = False  # the landing batch was full: more rows may wait
    land_error: str | None = None  # the landing failed and rolled back; the rows stay queued


def _report_batch(
    conn: sqlite3.Connection,
    chief_id: int,
    rows: list[NotifyRow],
    queue_telegram: bool,
    land: Callable[[str], str] | None,
    limit: int,
) -> BatchReported:
    """`_report` for several rows: every row's accept in ONE transaction (all or none), then at
    most one landing transaction, as a drain pass would."""
    accepted = _write(conn, _enqueue_notify_batch, chief_id, rows, queue_telegram)
    landed: list[tuple[str, int]] = []
    more = False
    land_error = None
    if any(landed_id is None for landed_id, *_ in accepted):
        # Every row is committed (FULL): from here each line survives a crash.
        fault("chief.report.after_insert")
        if land is not None:
            try:
                landed, more = _land(conn, chief_id, land, limit)
            except sqlite3.Error as exc:
                land_error = str(exc)
    found = dict(landed)
    answers = [
        Reported(
            landed_id if landed_id is not None else found.get(row.key),
            sent,
            telegram_message_id=sent_id,
            telegram_seq=seq,
            telegram_ahead=ahead,
        )
        for row, (landed_id, sent, sent_id, seq, ahead) in zip(rows, accepted, strict=True)
    ]
    return BatchReported(answers, landed, more, land_error)


def _enqueue_notify_batch(
    conn: sqlite3.Connection, chief_id: int, rows: list[NotifyRow], queue_telegram: bool
) -> list[tuple[int | None, bool, int | None, int | None, int]]:
    """The batch's accept transaction: what `_enqueue_notify` does for every row, in order, with
    the reads done once for the whole batch (the rows' keys and outbox ids are distinct, so no
    row's writes change another row's reads). A failure at any row rolls back every row before
    it (the caller's `_write`): none is half-recorded.

    Per row that is two statements at most (the report row, the Telegram entry) instead of six:
    the sent marks, the landed lines and the queued entries are each one `IN (...)` read, and
    the entries ahead of each queued one are one read of the queue from the batch's first."""
    outbox_ids = [row.outbox_id for row in rows]
    sent = _found(conn, "SELECT outbox_id, telegram_message_id FROM coop_notify_sent", outbox_ids)
    landed = _found(
        conn,
        "SELECT external_request_id, id FROM messages",
        [row.key for row in rows],
        "external_request_id",
    )
    queued = _found(conn, "SELECT outbox_id, seq FROM telegram_queue", outbox_ids)
    seqs: list[int | None] = []
    for index, row in enumerate(rows):
        if index:
            fault("chief.store.batch_next_row")  # test-only: a failure part-way through a batch
        if row.key not in landed:
            _insert_report(conn, chief_id, row.key, row.text, None)
        seq = None
        if queue_telegram and row.outbox_id not in sent:
            seq = queued.get(row.outbox_id)
            if seq is None:
                seq = _insert_telegram(conn, row.outbox_id, row.text)
        seqs.append(None if seq is None else int(seq))
    ahead = _entries_ahead(conn, [seq for seq in seqs if seq is not None])
    return [
        (
            None if landed.get(row.key) is None else int(landed[row.key]),
            row.outbox_id in sent,
            None if sent.get(row.outbox_id) is None else int(sent[row.outbox_id]),
            seq,
            0 if seq is None else ahead[seq],
        )
        for row, seq in zip(rows, seqs, strict=True)
    ]


def _found(
    conn: sqlite3.Connection, select: str, keys: list[str], column: str = "outbox_id"
) -> dict[str, Any]:
    """`select` (two columns: the key, a value) for the rows whose `column` is one of `keys`,
    as {key: value}. One statement for the whole list (SQLite takes 32,766 parameters; a batch
    is at most 256 rows)."""
    marks = ", ".join("?" * len(keys))
    return dict(conn.execute(f"{select} WHERE {column} IN ({marks})", keys).fetchall())


def _entries_ahead(conn: sqlite3.Connection, seqs: list[int]) -> dict[int, int]:
    """For each queue seq of `seqs`: how many Telegram entries are queued before it, read in
    one pass from the earliest (not one COUNT per entry, each scanning the queue before it)."""
    if not seqs:
        return {}
    first = min(seqs)
    (before,) = conn.execute(
        "SELECT COUNT(*) FROM telegram_queue WHERE seq < ?", (first,)
    ).fetchone()
    wanted = set(seqs)
    ahead: dict[int, int] = {}
    later = conn.execute("SELECT seq FROM telegram_queue WHERE seq >= ? ORDER BY seq", (first,))
    for rank, (seq,) in enumerate(later):
        if seq in wanted:
            ahead[int(seq)] = int(before) + rank
            if len(ahead) == len(wanted):
                break
    return ahead


@dataclass(frozen=True)
class QueuedRing:
    """One entry of the Telegram queue, as the sender task reads it."""

    seq: int
    outbox_id: str | None
    text: str
    attempts: int
    next_attempt_at: float  # unix seconds; 0 when never tried
    repeat_of: str | None = None  # the in-doubt send this entry rings again with (one group)


@dataclass(frozen=True)
class InDoubt:
    """One in-doubt event: the send `send_id` and the entries it carried, in order."""

    send_id: str
    seqs: list[int]
    outbox_ids: list[str]


@dataclass(frozen=True)
class TelegramQueueStatus:
    """What an operator sees of the Telegram queue."""

    depth: int
    oldest_queued_at: str | None
    last_error: str | None
    next_attempt_at: float | None  # unix seconds of the head's next try, when it was deferred
    in_doubt_events: int = 0  # sends whose outcome the door could not know, since chief.db began


def _telegram_head(conn: sqlite3.Connection, limit: int) -> list[QueuedRing]:
    rows = conn.execute(
        "SELECT seq, outbox_id, text, attempts, next_attempt_at, repeat_of FROM telegram_queue "
        "ORDER BY seq LIMIT ?",
        (limit,),
    ).fetchall()
    return [QueuedRing(int(a), b, str(c), int(d), float(e), f) for a, b, c, d, e, f in rows]


def _begin_send(conn: sqlite3.Connection, seqs: list[int], send_id: str) -> None:
    """The in-flight record of a send, committed (FULL) before the send goes out."""
    conn.executemany(
        "UPDATE telegram_queue SET send_id = ? WHERE seq = ?", [(send_id, seq) for seq in seqs]
    )


def _record_doubts(
    conn: sqlite3.Connection, reason: str, next_attempt_at: float | None
) -> list[InDoubt]:
    """Every send still in flight becomes one in-doubt event: its entries are recorded in
    telegram_doubts, keep the group they ring again with (`repeat_of`: the first in-doubt send
    of the group) and lose the in-flight mark; with `next_attempt_at`, they are deferred to it
    (a failed try) too."""
    rows = conn.execute(
        "SELECT send_id, seq, outbox_id FROM telegram_queue WHERE send_id IS NOT NULL ORDER BY seq"
    ).fetchall()
    events: dict[str, InDoubt] = {}
    for send_id, seq, outbox_id in rows:
        event = events.setdefault(str(send_id), InDoubt(str(send_id), [], []))
        event.seqs.append(int(seq))
        if outbox_id is not None:
            event.outbox_ids.append(str(outbox_id))
    now = _utc_now()
    conn.executemany(
        "INSERT OR IGNORE INTO telegram_doubts (send_id, seq, outbox_id, reason, recorded_at) "
        "VALUES (?, ?, ?, ?, ?)",
        [(str(send_id), int(seq), outbox_id, reason, now) for send_id, seq, outbox_id in rows],
    )
    conn.execute(
        "UPDATE telegram_queue SET repeat_of = COALESCE(repeat_of, send_id), send_id = NULL "
        "WHERE send_id IS NOT NULL"
    )
    if next_attempt_at is not None and rows:
        conn.executemany(
            "UPDATE telegram_queue SET attempts = attempts + 1, next_attempt_at = ?, "
            "last_error = ? WHERE seq = ?",
            [(next_attempt_at, reason, int(seq)) for _, seq, _ in rows],
        )
    return list(events.values())


def _mark_rung(
    conn: sqlite3.Connection, seqs: list[int], outbox_ids: list[str], telegram_message_id: int
) -> None:
    """The sent mark of every row one Telegram message carried, and their queue entries gone."""
    fault("chief.store.mark_notify_sent")  # test-only: a full disk under the sent mark
    now = _utc_now()
    conn.executemany(
        "INSERT OR IGNORE INTO coop_notify_sent (outbox_id, telegram_message_id, sent_at) "
        "VALUES (?, ?, ?)",
        [(outbox_id, telegram_message_id, now) for outbox_id in outbox_ids],
    )
    conn.executemany("DELETE FROM telegram_queue WHERE seq = ?", [(seq,) for seq in seqs])


def _defer_rings(
    conn: sqlite3.Connection, seqs: list[int], next_attempt_at: float, error: str
) -> None:
    conn.executemany(
        "UPDATE telegram_queue SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?, "
        "send_id = NULL WHERE seq = ?",
        [(next_attempt_at, error, seq) for seq in seqs],
    )


def _telegram_status(conn: sqlite3.Connection) -> TelegramQueueStatus:
    depth, oldest = conn.execute("SELECT COUNT(*), MIN(queued_at) FROM telegram_queue").fetchone()
    head = conn.execute(
        "SELECT last_error, next_attempt_at, attempts FROM telegram_queue ORDER BY seq LIMIT 1"
    ).fetchone()
    last_error = head[0] if head else None
    next_at = float(head[1]) if head and int(head[2]) > 0 else None
    (doubts,) = conn.execute("SELECT COUNT(DISTINCT send_id) FROM telegram_doubts").fetchone()
    return TelegramQueueStatus(int(depth), oldest, last_error, next_at, int(doubts))


def _notify_sent(conn: sqlite3.Connection, outbox_id: str) -> bool:
    found = conn.execute("SELECT 1 FROM coop_notify_sent WHERE outbox_id = ?", (outbox_id,))
    return found.fetchone() is not None


def _mark_notify_sent(
    conn: sqlite3.Connection, outbox_id: str, telegram_message_id: int | None
) -> None:
    fault("chief.store.mark_notify_sent")  # test-only: a full disk under the sent mark
    conn.execute(
        "INSERT OR IGNORE INTO coop_notify_sent (outbox_id, telegram_message_id, sent_at) "
        "VALUES (?, ?, ?)",
        (outbox_id, telegram_message_id, _utc_now()),
    )


def _land(
    conn: sqlite3.Connection, chief_id: int, turn_kind_of: Callable[[str], str], limit: int
) -> tuple[list[tuple[str, int]], bool]:
    """The landing transaction, committed with synchronous=NORMAL (see Durability above)."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        return _write(conn, _land_undelivered, chief_id, turn_kind_of, limit)
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
    now = _utc_now()
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
    ids = _found(conn, "SELECT external_request_id, id FROM messages", keys, "external_request_id")
    fault("chief.store.land_report")  # test-only: a full disk between the landing's writes
    conn.executemany(
        "UPDATE chief_report_outbox SET message_id = ?, landed_at = ? WHERE source_key = ?",
        [(ids[key], now, key) for key in keys],
    )
    return [(key, int(ids[key])) for key in keys], len(rows) == limit


def _append_message(
    conn: sqlite3.Connection, chief_id: int, role: str, content: str, turn_kind: str, origin: str
) -> int:
    cursor = conn.execute(
        "INSERT INTO messages (chief_id, role, content, turn_kind, origin, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (chief_id, role, content, turn_kind, origin, _utc_now()),
    )
    return int(cursor.lastrowid or 0)


def _recent_messages(conn: sqlite3.Connection, chief_id: int, limit: int) -> list[Message]:
    rows = conn.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE chief_id = ? ORDER BY id DESC LIMIT ?",
        (chief_id, limit),
    ).fetchall()
    return [Message(*row) for row in reversed(rows)]


def _owners(conn: sqlite3.Connection) -> list[str]:
    return [str(row[0]) for row in conn.execute("SELECT owner FROM chiefs ORDER BY id")]


def _scalar(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


class ChiefStore:
    """One sqlite3 connection to chief.db; every method is one use case in one thread hop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._closed = False
        self._db_thread = ConnectionThread("chief-db")
        self._conn: sqlite3.Connection | None = None  # used on that thread only

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path, *, create: bool = True) -> AsyncIterator[ChiefStore]:
        """Open (creating the file and its folder unless `create=False`) and migrate chief.db."""
        if not create and not await anyio.Path(path).exists():
            raise ChiefStoreError(
                f"no chief.db at {path} — start the door once (chief serve), or point CHIEF_DB at "
                "the right file"
            )
        try:
            await anyio.Path(path.parent).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ChiefStoreError(f"cannot create the folder of chief.db at {path}: {exc}") from exc
        store = cls(path)
        try:
            try:
                await store._db_thread.call(store._open)
            except sqlite3.Error as exc:
                raise ChiefStoreError(f"cannot open chief.db at {path}: {exc}") from exc
            await store._hop(_prepare, path)
            yield store
        finally:
            store._closed = True
            # Shielded: a cancelled owner still closes the connection, after the hops queued
            # before it.
            with anyio.CancelScope(shield=True):
                await store._db_thread.call(store._close)
            store._db_thread.stop()

    def _closed_error(self) -> ChiefStoreError:
        return ChiefStoreError(
            f"chief.db at {self.path} is closed — use the Chief inside its `async with` block"
        )

    async def _hop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(connection, *args)` on the connection's thread: one hop, errors translated."""
        if self._closed:
            raise self._closed_error()
        try:
            return await self._db_thread.call(self._run, fn, args)
        except sqlite3.Error as exc:
            raise ChiefStoreError(f"chief.db at {self.path}: {exc}") from exc

    # On the connection's thread:

    def _open(self) -> None:
        self._conn = _connect(self.path)

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._conn
        if conn is None:  # a hop that reached the thread after the closing one
            raise self._closed_error()
        return fn(conn, *args)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def resolve_chief(self, owner: str) -> int:
        """The owner's Master Chief id, created on first use."""
        return await self._hop(_write, _resolve_chief, owner)

    async def find_chief(self, owner: str) -> int | None:
        """The owner's Master Chief id, or None when it was never created (read only)."""
        found = await self._hop(_scalar, "SELECT id FROM chiefs WHERE owner = ?", (owner,))
        return None if found is None else int(found)

    async def owners(self) -> list[str]:
        """Every owner with a Master Chief in this file."""
        return await self._hop(_owners)

    async def report(
        self,
        chief_id: int,
        key: str,
        text: str,
        source_conversation_id: str | None,
        *,
        sent_for: str | None = None,
        queue_telegram: bool = False,
        land: Callable[[str], str] | None = None,
        limit: int = DRAIN_BATCH_ROWS,
    ) -> Reported:
        """One hop: whether `sent_for` was marked sent, then the landed message id for `key`, or
        durably queue the report and, with `queue_telegram`, `sent_for`'s Telegram entry unless
        it was rung (one commit), and, with `land` (the caller holds the turn
        lock and the drainer is idle), land up to `limit` undelivered rows in outbox order in
        one transaction, as a drain pass would. A failed landing leaves the rows queued."""
        return await self._hop(
            _report,
            chief_id,
            key,
            text,
            source_conversation_id,
            sent_for,
            queue_telegram,
            land,
            limit,
        )

    async def report_batch(
        self,
        chief_id: int,
        rows: list[NotifyRow],
        *,
        queue_telegram: bool = False,
        land: Callable[[str], str] | None = None,
        limit: int = DRAIN_BATCH_ROWS,
    ) -> BatchReported:
        """`report(..., sent_for=row.outbox_id)` for every row in ONE hop and ONE accept
        transaction (every row's sent-mark read, report row and Telegram entry commit together,
        or none does), then, with `land`, one landing transaction, as a drain pass would."""
        return await self._hop(_report_batch, chief_id, rows, queue_telegram, land, limit)

    async def land_undelivered(
        self, chief_id: int, turn_kind_of: Callable[[str], str], limit: int = DRAIN_BATCH_ROWS
    ) -> tuple[list[tuple[str, int]], bool]:
        """Append up to `limit` undelivered reports in outbox order and record each message id,
        all in one transaction. Returns ((key, message id) landed, whether more may wait)."""
        return await self._hop(_land, chief_id, turn_kind_of, limit)

    async def append_message(
        self, chief_id: int, role: str, content: str, turn_kind: str, origin: str
    ) -> int:
        """Append one message (autocommit, one statement) and return its id."""
        return await self._hop(_append_message, chief_id, role, content, turn_kind, origin)

    async def recent_messages(self, chief_id: int, limit: int) -> list[Message]:
        """The last `limit` messages, oldest first."""
        return await self._hop(_recent_messages, chief_id, limit)

    async def undelivered_count(self, chief_id: int) -> int:
        """Reports queued for this Chief that have not landed yet."""
        sql = "SELECT COUNT(*) FROM chief_report_outbox WHERE chief_id = ? AND message_id IS NULL"
        return int(await self._hop(_scalar, sql, (chief_id,)))

    async def notify_sent(self, outbox_id: str) -> bool:
        """Whether the door already rang Telegram for this Coop outbox row."""
        return await self._hop(_notify_sent, outbox_id)

    async def mark_notify_sent(self, outbox_id: str, telegram_message_id: int | None) -> None:
        """Record that Telegram accepted this row's message; a second mark writes nothing."""
        await self._hop(_mark_notify_sent, outbox_id, telegram_message_id)

    async def queue_telegram(self, text: str) -> tuple[int, int]:
        """Queue a Telegram entry with no outbox row (nothing to deduplicate by): its seq and
        how many entries are ahead of it."""
        return await self._hop(_write, _queue_telegram_alone, text)

    async def telegram_head(self, limit: int) -> list[QueuedRing]:
        """The first `limit` entries of the Telegram queue, oldest first."""
        return await self._hop(_telegram_head, limit)

    async def mark_rung(
        self, seqs: list[int], outbox_ids: list[str], telegram_message_id: int
    ) -> None:
        """One transaction: mark every outbox row the message carried as sent (a repeat writes
        nothing) and take their entries off the queue."""
        await self._hop(_write, _mark_rung, seqs, outbox_ids, telegram_message_id)

    async def defer_rings(self, seqs: list[int], next_attempt_at: float, error: str) -> None:
        """Count a failed try of these entries and when to try again (nothing rang: their
        in-flight record is cleared)."""
        await self._hop(_write, _defer_rings, seqs, next_attempt_at, error)

    async def begin_send(self, seqs: list[int], send_id: str) -> None:
        """Record, durably and before the send, that `send_id` carries these entries."""
        await self._hop(_write, _begin_send, seqs, send_id)

    async def record_doubts(self, reason: str, next_attempt_at: float | None) -> list[InDoubt]:
        """One transaction: each send still in flight becomes an in-doubt event (recorded, and
        its entries kept as one group to ring again, marked); with `next_attempt_at`, deferred
        to it. The events, each with its entries."""
        return await self._hop(_write, _record_doubts, reason, next_attempt_at)

    async def telegram_status(self) -> TelegramQueueStatus:
        """Depth, oldest entry, the head's last error and next try."""
        return await self._hop(_telegram_status)

    async def sent_count(self) -> int:
        """Coop outbox rows the door has rung Telegram for."""
        return int(await self._hop(_scalar, "SELECT COUNT(*) FROM coop_notify_sent", ()))
