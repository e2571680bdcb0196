"""The ledger's SQLite file: opening it (and migrating it), the one write transaction, the
read snapshot, and the clock of `*_at` columns. The `engine.store` package is the only code in
the engine that speaks SQL:

    engine.store           connection, `write()`, `snapshot()`, `unit_of_work()`, the clock
    engine.store.schema    the migrations, and the fence triggers `coop cutover` installs
    engine.store.ledger    todos, requests and the append-only `coop_events`
    engine.store.queue     `coop_outbox` and `worker_lock`: producers, the notifier and status
    engine.store.commands  the owner's command log (`coop_commands`)
    engine.store.answers   the phone's answers, each filed once by its key (`coop_answers`)

Every write is one `BEGIN IMMEDIATE` transaction: SQLite has one writer, so a check made in
Python inside the transaction is sound, and nothing outside it decides anything. The modules
beside this one take the connection of a transaction already open; they never open their own.

sqlite3 errors are translated here into `StoreError`, so callers see one error tree. The store
reads no owner file: whether a call runs here or at the owner service is decided above it
(`engine.api`), and the direct door for scripts, shut in service mode, is `engine.direct`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from contextlib import contextmanager
from datetime import UTC, datetime

from engine.config import db_file, pure_path
from engine.errors import StoreError
from engine.store.schema import FENCE_FUNCTION, MIGRATIONS, statements

# The fence's DDL lives in engine.store.schema; `coop cutover` and its tests call it here.
from engine.store.schema import fence_refuses as fence_refuses
from engine.store.schema import fence_triggers as fence_triggers
from engine.store.schema import install_fence as install_fence
from engine.store.schema import remove_fence as remove_fence
from plumbing import files
from plumbing.wal import enter_wal

# `typing` and `pathlib` stay off the CLI's cold path: annotations only, read by mypy.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

BUSY_TIMEOUT_MS = 30_000


def now_iso() -> str:
    """UTC wall time as stored in every `*_at` text column (millisecond precision)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def now_epoch() -> float:
    return time.time()


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def locate(db: str | os.PathLike[str] | None) -> str:
    """The database path a caller means, as text: the one given, else the configured one
    (`resolve()` without pathlib, for the CLI's cold path)."""
    return pure_path(os.fspath(db)) if db is not None else db_file()


def resolve(db: str | os.PathLike[str] | None) -> Path:
    """The database path a caller means: the one given, else the configured one."""
    from pathlib import Path

    return Path(locate(db))


SYNCHRONOUS_MODES = ("FULL", "NORMAL")


def open_connection(
    path: str | os.PathLike[str], *, check_same_thread: bool = True, synchronous: str = "FULL"
) -> sqlite3.Connection:
    """Open the ledger file with its pragmas and bring its schema up to date.

    Autocommit mode (`isolation_level=None`): transactions are explicit, see `write()`.
    `check_same_thread=False` is for the owner service, which serialises its connection's use
    with a lock and runs each call in a worker thread. `synchronous="NORMAL"` is for the
    notifier's own delivery marks only (`notifier.delivery.open_own_connection` says why).
    """
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS_MODES}, not {synchronous!r}")
    try:
        # Owner-only whatever the umask: the folders 0700, the file 0600 before SQLite opens it
        # (SQLite gives -wal and -shm the file's mode), an older looser file tightened.
        files.private_database(path)
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=check_same_thread,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        enter_wal(conn, BUSY_TIMEOUT_MS / 1000)
        # FULL: a committed `coop todo done` and its outbox row survive a power cut, not only
        # a process crash.
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn)
    except (sqlite3.Error, OSError) as exc:
        # OSError: the folder cannot be made (a file in the way, no permission), or the file is
        # another user's.
        raise StoreError(f"cannot open the Coop database at {path}: {exc}") from exc
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version >= len(MIGRATIONS):
        return
    # A migration may rewrite rows of a fenced table (a ledger upgraded in service mode, whose
    # owner service opens it before it registers the fence function): the fence lets this
    # connection's writes through while it migrates, and refuses them with the fence's own
    # words afterwards, until the owner registers the function for good.
    migrating = [True]
    conn.create_function(FENCE_FUNCTION, 0, lambda: 1 if migrating else None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Re-read inside the write lock: another process may have migrated meanwhile.
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
            for statement in statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
        if fence_triggers(conn):
            # A ledger upgraded in service mode: a table the migration added is fenced as the
            # others were at the cutover (the triggers are created only where missing).
            install_fence(conn)
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise
    finally:
        migrating.clear()


def open_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection for a scrape: never migrates, never writes, never creates.

    sqlite3's errors pass through untranslated: the scrape answers 503 with SQLite's own words
    (`engine.metrics`)."""
    from pathlib import Path  # a scrape's, not the CLI's

    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    conn.row_factory = sqlite3.Row
    return conn


@contextmanager
def unit_of_work(
    path: str | os.PathLike[str], *, writing: bool
) -> Iterator[Callable[[], sqlite3.Connection]]:
    """One use case's transaction, opened on first use: the block gets a function that opens
    the connection and begins the transaction the first time it is called (a write: `write()`;
    a read: one `snapshot()`), so a call refused on its arguments opens nothing. Leaving the
    block commits (or rolls back, if it raised) and closes the connection."""
    with contextlib.ExitStack() as stack:
        opened: list[sqlite3.Connection] = []

        def tx() -> sqlite3.Connection:
            if not opened:
                conn = open_connection(path)
                stack.callback(conn.close)
                stack.enter_context(write(conn) if writing else snapshot(conn))
                opened.append(conn)
            return opened[0]

        yield tx


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Run the block inside `BEGIN IMMEDIATE`; commit if it finishes, roll back otherwise.

    If the connection is already inside a transaction (the owner service files each command in
    the same transaction as the verb it runs), the block becomes a savepoint of that
    transaction: a refused verb rolls back its own changes, and the outer transaction commits
    the verb and its filing together or neither.
    """
    if conn.in_transaction:
        conn.execute("SAVEPOINT coop_verb")
        with _undone_on_failure(conn, _rollback_savepoint):
            yield conn
        conn.execute("RELEASE coop_verb")
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot start a write on the Coop database: {exc}") from exc
    with _undone_on_failure(conn, _rollback):
        yield conn
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        _rollback(conn)
        raise StoreError(f"the Coop database could not commit: {exc}") from exc


@contextmanager
def durable_write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """`write(conn)` committed with `synchronous=FULL` whatever the connection's own setting
    (the notifier's connections run NORMAL for their delivery marks): a change of the ledger
    itself, such as a deadline's close, is as durable as every producer's."""
    (before,) = conn.execute("PRAGMA synchronous").fetchone()
    if int(before) >= FULL_SYNCHRONOUS:
        with write(conn):
            yield conn
        return
    conn.execute("PRAGMA synchronous = FULL")  # outside a transaction, where it takes effect
    try:
        with write(conn):
            yield conn
    finally:
        conn.execute(f"PRAGMA synchronous = {int(before)}")


#: `PRAGMA synchronous`'s number for FULL (OFF 0, NORMAL 1, FULL 2, EXTRA 3).
FULL_SYNCHRONOUS = 2


@contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every read in the block sees the same committed state."""
    try:
        conn.execute("BEGIN")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the Coop database: {exc}") from exc
    try:
        yield conn
    finally:
        _rollback(conn)


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back what is left of the transaction, if anything is.

    On SQLITE_FULL, SQLITE_IOERR or SQLITE_NOMEM SQLite may already have rolled the whole
    transaction back by the time the error reaches Python; a second ROLLBACK would raise its
    own `OperationalError` over the real one. A rollback that fails anyway (the file is gone)
    leaves SQLite to discard the transaction when the connection closes: the caller still gets
    the error that caused it.
    """
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


@contextmanager
def _undone_on_failure(
    conn: sqlite3.Connection, undo: Callable[[sqlite3.Connection], None]
) -> Iterator[sqlite3.Connection]:
    """Run a write's block; if it fails, `undo` its changes (the transaction or the verb's
    savepoint) and raise a driver error as `StoreError`, anything else as it is."""
    try:
        yield conn
    except sqlite3.Error as exc:
        undo(conn)
        raise StoreError(f"the Coop database refused the write: {exc}") from exc
    except BaseException:
        undo(conn)
        raise


def _rollback_savepoint(conn: sqlite3.Connection) -> None:
    """Undo the verb's own changes; if SQLite already ended the whole transaction (a full
    disk), there is no savepoint left to undo and the outer write sees no transaction either."""
    if conn.in_transaction:
        conn.execute("ROLLBACK TO coop_verb")
        conn.execute("RELEASE coop_verb")
