"""chief.db's schema: the migrations (the version in PRAGMA user_version, migrated on open) and
how a connection is opened and prepared (WAL, synchronous=FULL, foreign keys)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chief.errors import ChiefStoreError
from chief.store.sql import write
from plumbing import files
from plumbing.wal import enter_wal

BUSY_TIMEOUT_S = 5.0

# telegram_answers' columns as their first migration made them (issue 26's copies them over).
_ANSWER_COLUMNS = (
    "answer_key, update_id, request_id, ask_key, choice, text, chat_id, message_id, ask_text, "
    "callback_query_id, state, outcome, detail, attempts, next_attempt_at, last_error, "
    "recorded_at, settled_at, edited_at"
)

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
    (
        # Asks (issue 21): a request to the owner rung alone with one button per choice. An
        # ask is known by its ask key (the ledger's random `q-` key of the question), never by
        # the request's id alone: ids come back (a fresh coop.db, a restored backup, a second
        # ledger behind this door). The queue entry that rings it names its key;
        # `chief.store.asks` owns the rest.
        "ALTER TABLE telegram_queue ADD COLUMN ask_key TEXT",
        """CREATE TABLE asks (
            ask_key TEXT PRIMARY KEY,
            request_id INTEGER NOT NULL,
            title TEXT NOT NULL,
            choices TEXT NOT NULL,
            outbox_id TEXT,
            opened_at TEXT NOT NULL,
            voided_at TEXT,
            settled_at TEXT,
            settle_text TEXT
        )""",
        """CREATE TABLE ask_buttons (
            token TEXT PRIMARY KEY,
            ask_key TEXT NOT NULL REFERENCES asks(ask_key),
            choice TEXT NOT NULL,
            position INTEGER NOT NULL,
            void INTEGER NOT NULL DEFAULT 0,
            minted_at TEXT NOT NULL
        )""",
        "CREATE INDEX ask_buttons_by_ask ON ask_buttons (ask_key, void, position)",
        """CREATE TABLE ask_messages (
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            ask_key TEXT NOT NULL REFERENCES asks(ask_key),
            text TEXT NOT NULL,
            sent_at TEXT NOT NULL,
            PRIMARY KEY (chat_id, message_id)
        )""",
        "CREATE INDEX ask_messages_by_ask ON ask_messages (ask_key, sent_at)",
        """CREATE TABLE ask_edits (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            ask_key TEXT NOT NULL,
            request_id INTEGER NOT NULL,
            text TEXT NOT NULL,
            queued_at TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            UNIQUE (chat_id, message_id)
        )""",
    ),
    (
        # The owner's answers from the phone (chief.store.answers): one row per tap or reply
        # that became an answer, recorded before the tap is acknowledged; `answer_key` is the
        # ledger's exactly-once key, `update_id` finds a replayed update's row, `ask_key` is the
        # question answered (the ledger applies it only to the request with that key).
        """CREATE TABLE telegram_answers (
            answer_key TEXT PRIMARY KEY,
            update_id INTEGER NOT NULL UNIQUE,
            request_id INTEGER NOT NULL,
            ask_key TEXT NOT NULL,
            choice TEXT,
            text TEXT,
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            ask_text TEXT NOT NULL DEFAULT '',
            callback_query_id TEXT,
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'applied', 'refused')),
            outcome TEXT,
            detail TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            recorded_at TEXT NOT NULL,
            settled_at TEXT,
            edited_at TEXT,
            CHECK ((choice IS NULL) <> (text IS NULL))
        )""",
        "CREATE INDEX telegram_answers_by_ask ON telegram_answers (ask_key)",
        # What the forwarder still has work on: the answers waiting for the ledger.
        """CREATE INDEX telegram_answers_pending ON telegram_answers (recorded_at)
        WHERE state = 'pending'""",
    ),
    (
        # The door's phone (chief.store.inbox): one row of state, the next getUpdates offset
        # (update_id + 1 of the last update handled) and the owner's /quiet override.
        """CREATE TABLE telegram_inbox (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            next_offset INTEGER,
            quiet_until REAL
        )""",
        "INSERT INTO telegram_inbox (id) VALUES (1)",
        # Senders the door does not obey, each logged once; bounded by the store (oldest out).
        """CREATE TABLE telegram_strangers (
            sender_id INTEGER PRIMARY KEY,
            chat_id INTEGER,
            updates INTEGER NOT NULL,
            first_seen_at TEXT NOT NULL,
            last_seen_at TEXT NOT NULL
        )""",
    ),
    (
        # Issue 26: Telegram's update ids restart and repeat (at random after a week without
        # updates; an emulator from 1 on restart), so no id floor filters updates any more.
        # Each update is known by its key (chief.telegram.update_key: its id and a digest of
        # its content): the updates the phone handled, the most recent ones kept (a replay
        # comes within one unconfirmed batch), so a replay is applied once and a new update
        # under an old id is never mistaken for it.
        """CREATE TABLE telegram_updates_seen (
            update_key TEXT PRIMARY KEY,
            update_id INTEGER NOT NULL,
            handled_at TEXT NOT NULL
        )""",
        # The inbox keeps the id of the last update handled, only to notice (and say once)
        # that the ids went back; it filters nothing.
        "ALTER TABLE telegram_inbox RENAME COLUMN next_offset TO last_update_id",
        "UPDATE telegram_inbox SET last_update_id = last_update_id - 1",
        # An answer's replay guard is the update's key, not its id (a reused id must not find
        # an old answer): the table rebuilt without `update_id UNIQUE`. A row recorded before
        # keeps its id as its key (no digest of it is known).
        """CREATE TABLE telegram_answers_keyed (
            answer_key TEXT PRIMARY KEY,
            update_key TEXT NOT NULL UNIQUE,
            update_id INTEGER NOT NULL,
            request_id INTEGER NOT NULL,
            ask_key TEXT NOT NULL,
            choice TEXT,
            text TEXT,
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            ask_text TEXT NOT NULL DEFAULT '',
            callback_query_id TEXT,
            state TEXT NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'applied', 'refused')),
            outcome TEXT,
            detail TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            recorded_at TEXT NOT NULL,
            settled_at TEXT,
            edited_at TEXT,
            CHECK ((choice IS NULL) <> (text IS NULL))
        )""",
        f"""INSERT INTO telegram_answers_keyed (update_key, {_ANSWER_COLUMNS})
        SELECT CAST(update_id AS TEXT), {_ANSWER_COLUMNS} FROM telegram_answers ORDER BY rowid""",
        "DROP TABLE telegram_answers",
        "ALTER TABLE telegram_answers_keyed RENAME TO telegram_answers",
        "CREATE INDEX telegram_answers_by_ask ON telegram_answers (ask_key)",
        """CREATE INDEX telegram_answers_pending ON telegram_answers (recorded_at)
        WHERE state = 'pending'""",
    ),
    (
        # Issue 28, the phone's side of deadlines and reminders (chief.store.reminders): an
        # ask keeps its deadline, its default and its reminders' bounds, and, when its
        # deadline decided it, how (a late tap's toast says so). A reminder's queue entry
        # rings as a reply to the ask's first message.
        "ALTER TABLE asks ADD COLUMN deadline_at REAL",
        "ALTER TABLE asks ADD COLUMN default_choice TEXT",
        "ALTER TABLE asks ADD COLUMN remind_every_s REAL",
        "ALTER TABLE asks ADD COLUMN remind_max INTEGER",
        "ALTER TABLE asks ADD COLUMN settled_by TEXT",
        "ALTER TABLE asks ADD COLUMN settled_outcome TEXT",
        "ALTER TABLE asks ADD COLUMN settled_choice TEXT",
        "ALTER TABLE telegram_queue ADD COLUMN reply_to_message_id INTEGER",
        # One schedule per ask with reminders, made in the transaction of its first sent
        # mark; `next_at` NULL once it ended (max rung, the deadline, a settle). A reminder
        # held by quiet hours or /quiet keeps its due time in `held_due_at`, and is looked at
        # again at every turn of the nag task (a /quiet ended early rings it at once).
        """CREATE TABLE ask_reminders (
            ask_key TEXT PRIMARY KEY,
            request_id INTEGER NOT NULL,
            title TEXT NOT NULL,
            every_s REAL NOT NULL CHECK (every_s >= 1),
            max_rings INTEGER NOT NULL CHECK (max_rings >= 1),
            deadline_at REAL,
            chat_id NOT NULL,
            first_message_id INTEGER NOT NULL,
            first_rang_at REAL NOT NULL,
            rung INTEGER NOT NULL DEFAULT 0,
            next_at REAL,
            held_due_at REAL,
            ended_at TEXT,
            end_reason TEXT
        )""",
        "CREATE INDEX ask_reminders_due ON ask_reminders (next_at) WHERE next_at IS NOT NULL",
    ),
    (
        # Urgent reports (issue 28, chief.store.urgent): rung loud until acknowledged. The
        # queue entry of a ring names its urgent key (the outbox id of the row that filed it).
        "ALTER TABLE telegram_queue ADD COLUMN urgent TEXT",
        "CREATE INDEX telegram_queue_urgent ON telegram_queue (urgent) WHERE urgent IS NOT NULL",
        """CREATE TABLE urgent_reports (
            urgent_key TEXT PRIMARY KEY,
            chief_id INTEGER NOT NULL REFERENCES chiefs(id),
            ask_key TEXT,
            text TEXT NOT NULL,
            token TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            rings INTEGER NOT NULL DEFAULT 1,
            next_at REAL,
            expires_at REAL,
            acked_at REAL,
            acked_via TEXT CHECK (acked_via IN ('got_it', 'reply', 'settled')),
            expired_at REAL
        )""",
        "CREATE INDEX urgent_reports_due ON urgent_reports (next_at) WHERE next_at IS NOT NULL",
        "CREATE INDEX urgent_reports_by_ask ON urgent_reports (ask_key) WHERE ask_key IS NOT NULL",
        """CREATE TABLE urgent_messages (
            chat_id INTEGER NOT NULL,
            message_id INTEGER NOT NULL,
            urgent_key TEXT NOT NULL REFERENCES urgent_reports(urgent_key),
            ring INTEGER NOT NULL,
            text TEXT NOT NULL,
            live INTEGER NOT NULL DEFAULT 1,
            sent_at TEXT NOT NULL,
            PRIMARY KEY (chat_id, message_id)
        )""",
        "CREATE INDEX urgent_messages_by_key ON urgent_messages (urgent_key)",
    ),
    (
        # The ladder of urgent reports (issue 35, chief.store.urgent): the rung each report has
        # reached, when it climbs next (`escalate_at`, NULL once no rung is left or it stopped),
        # who acknowledged it (`acked_by`: owner | second | machine | settle; `acked_via` stays
        # NULL for `chief ack`, which is no phone path), the chat a queue entry rings when it
        # is not the owner's (`telegram_queue.chat`: rung 2's), and the rung of each message.
        "ALTER TABLE urgent_reports ADD COLUMN rung INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE urgent_reports ADD COLUMN escalate_at REAL",
        "ALTER TABLE urgent_reports ADD COLUMN acked_by TEXT "
        "CHECK (acked_by IN ('owner', 'second', 'machine', 'settle'))",
        "ALTER TABLE urgent_messages ADD COLUMN rung INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE telegram_queue ADD COLUMN chat TEXT",
        """CREATE INDEX urgent_reports_escalate ON urgent_reports (escalate_at)
        WHERE escalate_at IS NOT NULL""",
    ),
    (
        # The fallback channel (issue 35, rung 3; chief.store.fallback): the Telegram outages
        # the door saw, and each message owed to the fallback channel with its in-flight record.
        """CREATE TABLE fallback_outages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            since REAL NOT NULL,
            reason TEXT NOT NULL,
            ended_at REAL,
            told INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE fallback_sends (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            outage_id INTEGER NOT NULL REFERENCES fallback_outages(id),
            kind TEXT NOT NULL CHECK (kind IN ('notice', 'report')),
            urgent_key TEXT UNIQUE,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            queued_at REAL NOT NULL,
            send_id TEXT,
            repeat INTEGER NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_attempt_at REAL NOT NULL DEFAULT 0,
            last_error TEXT,
            sent_at REAL,
            carried_by TEXT
        )""",
        """CREATE UNIQUE INDEX fallback_one_notice ON fallback_sends (outage_id)
        WHERE kind = 'notice'""",
        "CREATE INDEX fallback_sends_waiting ON fallback_sends (seq) WHERE sent_at IS NULL",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path) -> sqlite3.Connection:
    # Owner-only whatever the umask: the file made 0600 before SQLite opens it (SQLite gives
    # -wal and -shm the file's mode), an older looser one tightened with its -wal and -shm.
    files.private_database(path)
    # isolation_level=None: no implicit BEGINs; transactions are the explicit ones above.
    return sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    mode = enter_wal(conn, BUSY_TIMEOUT_S)
    if str(mode).lower() != "wal":
        raise ChiefStoreError(
            f"chief.db at {path} cannot use WAL (journal mode stays {mode!r}) — put it on a local "
            "file system"
        )
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Inside BEGIN IMMEDIATE, so two processes opening a fresh file never both migrate it.
    write(conn, _migrate, path)


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
