"""The ledger's schema: the migrations that build it, and the fence triggers `coop cutover`
adds (DDL only; `engine.store.open_connection` applies the migrations, `engine.owner.cutover`
installs and removes the fence inside its own write), with the SQL function the owner's
connections register to pass the fence (`register_fence_function`).
"""

from __future__ import annotations

import sqlite3

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Iterator

# A delivery key is this prefix and 16 random bytes in hex: 34 characters of the door's
# [A-Za-z0-9_.:-], within its 128 (chief.door.router `MAX_OUTBOX_ID_CHARS`). The prefix keeps
# new keys apart from the old ones: rows older than migration 3 keep their id as their key.
DELIVERY_KEY_PREFIX = "d-"
DELIVERY_KEY_BYTES = 16
# An ask key is this prefix and 16 random bytes in hex: the identity of one question put to the
# owner's phone (`requests.ask_key`), drawn with the request (`engine.store.ledger.insert`).
ASK_KEY_PREFIX = "q-"
ASK_KEY_BYTES = 16

# Each entry moves the schema one version up; `PRAGMA user_version` records how far a file is.
# Status columns are plain TEXT with no CHECK: the rules live in the verbs (engine.lifecycle).
MIGRATIONS: list[str] = [
    """
    CREATE TABLE todos (
        id             INTEGER PRIMARY KEY,
        title          TEXT NOT NULL,
        body           TEXT,
        status         TEXT NOT NULL DEFAULT 'open',
        created_by     TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        taken_by       TEXT,
        taken_at       TEXT,
        closed_by      TEXT,
        closed_at      TEXT,
        reason         TEXT,
        result_summary TEXT,
        commit_sha     TEXT,
        updated_at     TEXT NOT NULL
    );
    CREATE TABLE requests (
        id             INTEGER PRIMARY KEY,
        title          TEXT NOT NULL,
        body           TEXT,
        addressed_to   TEXT,
        status         TEXT NOT NULL DEFAULT 'open',
        created_by     TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        taken_by       TEXT,
        taken_at       TEXT,
        closed_by      TEXT,
        closed_at      TEXT,
        reason         TEXT,
        result_summary TEXT,
        commit_sha     TEXT,
        updated_at     TEXT NOT NULL
    );
    CREATE TABLE coop_events (
        id        INTEGER PRIMARY KEY,
        item_kind TEXT NOT NULL,
        item_id   INTEGER NOT NULL,
        event     TEXT NOT NULL,
        actor     TEXT NOT NULL,
        at        TEXT NOT NULL,
        payload   TEXT
    );
    CREATE INDEX coop_events_item ON coop_events (item_kind, item_id, id);
    CREATE TRIGGER coop_events_no_update BEFORE UPDATE ON coop_events
    BEGIN SELECT RAISE(ABORT, 'coop_events is append-only: events are never updated'); END;
    CREATE TRIGGER coop_events_no_delete BEFORE DELETE ON coop_events
    BEGIN SELECT RAISE(ABORT, 'coop_events is append-only: events are never deleted'); END;
    CREATE TABLE coop_outbox (
        id              INTEGER PRIMARY KEY,
        kind            TEXT NOT NULL,
        text            TEXT NOT NULL,
        source          TEXT,
        state           TEXT NOT NULL DEFAULT 'pending',
        created_at      TEXT NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_attempt_at TEXT,
        last_error      TEXT,
        door_answer     TEXT,
        delivered_at    TEXT,
        cancelled_at    TEXT,
        cancelled_by    TEXT,
        cancel_reason   TEXT
    );
    CREATE INDEX coop_outbox_pending ON coop_outbox (id) WHERE state = 'pending';
    CREATE TABLE worker_lock (
        singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
        owner       TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        host        TEXT NOT NULL,
        started_at  REAL,
        acquired_at TEXT NOT NULL
    );
    """,
    # 2: the owner service files every command it runs under the caller's request key, in the
    # same transaction as the command's own change, so `coop reconcile KEY` has one answer.
    """
    CREATE TABLE coop_commands (
        key           TEXT PRIMARY KEY,
        method        TEXT NOT NULL,
        input_sha256  TEXT NOT NULL,
        actor         TEXT,
        metadata      TEXT,
        outcome       TEXT NOT NULL,
        result        TEXT,
        error_type    TEXT,
        error_message TEXT,
        filed_at      TEXT NOT NULL
    );
    """,
    # 3: the delivery key, the identity the door deduplicates a row by (its `outbox_id`: the
    # Chief's report key and the Telegram sent mark). A random 128-bit value written with the
    # row (`engine.store.queue.enqueue`), never derived from the id, so no restored backup,
    # fresh coop.db or second ledger sharing a door can produce one again. Rows already in the
    # file keep the key the previous notifier sent for them, their id: a row in flight across
    # the upgrade finds its landed line and its sent mark. A writer that names no key (a
    # script, an older engine) gets one of the same shape from the trigger.
    f"""
    ALTER TABLE coop_outbox ADD COLUMN delivery_key TEXT;
    UPDATE coop_outbox SET delivery_key = CAST(id AS TEXT);
    CREATE UNIQUE INDEX coop_outbox_delivery_key ON coop_outbox (delivery_key);
    CREATE TRIGGER coop_outbox_delivery_key AFTER INSERT ON coop_outbox
    WHEN NEW.delivery_key IS NULL BEGIN
        UPDATE coop_outbox
        SET delivery_key = '{DELIVERY_KEY_PREFIX}' || lower(hex(randomblob({DELIVERY_KEY_BYTES})))
        WHERE id = NEW.id;
    END;
    """,
    # 4: the phone answers back (issue 21). A request to the owner may carry the labels of its
    # answers (`choices`, a JSON list, NULL for none); an outbox row may carry the fields the
    # door needs beside its text (`extra`, a JSON object: `ask`, `settles`, `ring`; NULL for an
    # ordinary row, whose body stays exactly as before); and every answer from the phone is
    # filed once by the key the door gave it (`coop_answers`), in the transaction that applies
    # it, so a retried answer finds its outcome instead of applying again. A request filed to
    # the owner carries its ask key (`ask_key`, `q-` + 32 random hex digits, NULL for a request
    # never asked on the phone): the door knows the question by it, never by the request's id,
    # which a fresh coop.db, a restored backup or a second ledger hands out again; an answer
    # applies only to the request whose ask key it names.
    """
    ALTER TABLE requests ADD COLUMN choices TEXT;
    ALTER TABLE requests ADD COLUMN ask_key TEXT;
    CREATE UNIQUE INDEX requests_ask_key ON requests (ask_key) WHERE ask_key IS NOT NULL;
    ALTER TABLE coop_outbox ADD COLUMN extra TEXT;
    CREATE TABLE coop_answers (
        answer_key TEXT PRIMARY KEY,
        request_id INTEGER NOT NULL,
        outcome    TEXT NOT NULL,
        detail     TEXT NOT NULL,
        at         TEXT NOT NULL
    );
    """,
    # 5: a request's deadline, its default, its reminders and its urgency (issue 28). The
    # deadline is the epoch second (UTC) at which the ledger decides the request (NULL: none):
    # closed with `default_choice` (a label of its choices), or abandoned when that is NULL.
    # `remind_every_s` and `remind_max` (COOP_REMIND_MAX when filed) are the ask's reminders;
    # `urgent` (0 or 1) rings it alone and loud. The index finds the earliest open deadline, for
    # the notifier daemon that sleeps until it.
    """
    ALTER TABLE requests ADD COLUMN deadline_at REAL;
    ALTER TABLE requests ADD COLUMN default_choice TEXT;
    ALTER TABLE requests ADD COLUMN remind_every_s REAL;
    ALTER TABLE requests ADD COLUMN remind_max INTEGER;
    ALTER TABLE requests ADD COLUMN urgent INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX requests_open_deadline ON requests (deadline_at)
    WHERE deadline_at IS NOT NULL AND status IN ('open', 'taken');
    """,
]

# The fence: while the ledger is in service mode, every write to these tables needs the SQL
# function only the owner's connections register (`register_fence_function`). Installed
# by `coop cutover`, dropped by `coop cutover --undo`: in local mode there is no fence at all,
# so the notifier and the CLI write as before.
DIRECT_SQL_DISABLED = "Direct SQL is disabled; use the Coop service API"
#: The SQL function the fence triggers call. Only connections the owner opens register it, so a
#: raw writer elsewhere fails with `no such function: coop_owner_service_required`.
FENCE_FUNCTION = "coop_owner_service_required"
FENCED_TABLES = (
    "todos",
    "requests",
    "coop_events",
    "coop_outbox",
    "worker_lock",
    "coop_commands",
    "coop_answers",
)
FENCED_OPERATIONS = ("INSERT", "UPDATE", "DELETE")
FENCE_TRIGGER_PREFIX = "coop_fence_"


def statements(script: str) -> Iterator[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


def _fence_triggers(tables: tuple[str, ...] = FENCED_TABLES) -> Iterator[tuple[str, str]]:
    for table in tables:
        for operation in FENCED_OPERATIONS:
            name = f"{FENCE_TRIGGER_PREFIX}{table}_{operation.lower()}"
            yield (
                name,
                (
                    f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {operation} ON {table}"
                    f" WHEN {FENCE_FUNCTION}() IS NOT 1 BEGIN"
                    f" SELECT RAISE(ABORT, '{DIRECT_SQL_DISABLED} (the Coop owner service"
                    " is the only writer)'); END"
                ),
            )


def register_fence_function(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Mark a connection as the owner's: the fence triggers let its writes through."""
    conn.create_function(FENCE_FUNCTION, 0, _owner_marker, deterministic=True)
    return conn


def _owner_marker() -> int:
    return 1


def install_fence(conn: sqlite3.Connection) -> list[str]:
    """Create the fence triggers (inside the caller's write), where missing, on every fenced
    table the file has (one at an older schema lacks the later ones; the migration that adds
    a table to a fenced file fences it: `engine.store._migrate`); return their names."""
    present = {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    names = []
    for name, ddl in _fence_triggers(tuple(t for t in FENCED_TABLES if t in present)):
        conn.execute(ddl)
        names.append(name)
    return names


def remove_fence(conn: sqlite3.Connection) -> list[str]:
    """Drop every fence trigger (inside the caller's write); return the names that existed."""
    present = fence_triggers(conn)
    for name in present:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    return present


def fence_refuses(conn: sqlite3.Connection) -> bool:
    """Whether the fence is up and refuses this connection's writes: it has not registered the
    owner's function (a standalone notifier daemon after a cutover, or beside a cutover cut
    short before its owner file was written)."""
    if not fence_triggers(conn):
        return False
    try:
        conn.execute(f"SELECT {FENCE_FUNCTION}()").fetchone()
    except sqlite3.OperationalError:  # no such function: not the owner's connection
        return True
    return False


def fence_triggers(conn: sqlite3.Connection) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE ? ORDER BY name",
            (FENCE_TRIGGER_PREFIX + "%",),
        )
    ]
