"""Who may touch the ledger: the owner file, the owner's request context, and `routed`.

After `coop cutover`, `<store>.owner.json` (or the file `COOP_OWNER_FILE` names) says the
ledger has one writer, the owner service, and where it listens:

    {"mode": "service", "database": "/abs/coop.db", "url": "http://127.0.0.1:8764",
     "credential_file": "/abs/coop.db.owner.key", "transferred_at": "...", "backup": "..."}

The file is read on **every** call, so running processes follow a cutover or its undo at their
next call. A bad file fails closed before anything is routed or opened: a wrong mode, another
database, invalid JSON, a missing `database` or an unreadable file all raise exactly
`Invalid Coop owner configuration` (`OwnerUnavailable`), with what was wrong in its `detail`,
which the CLI prints on a line of its own.

Every public ledger and outbox verb is wrapped by `routed`: with an owner file, the call is
shipped to the owner (`engine.compat`); inside the owner's own request context (`OwnerContext`,
entered by the owner service around each call it runs) the function runs locally on the owner's
borrowed connection. `engine.store.connection()` consults this module: it lends the borrowed
connection, or refuses with `Direct SQL is disabled; use the Coop service API` when an owner
file exists.

Standard library only, and no import of `engine.store` (which imports this module).
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from engine.config import db_path as configured_db_path
from engine.errors import OwnerUnavailable

OWNER_FILE_ENV = "COOP_OWNER_FILE"
OWNER_FILE_SUFFIX = ".owner.json"
SERVICE_MODE = "service"

INVALID_OWNER = "Invalid Coop owner configuration"
DIRECT_SQL_DISABLED = "Direct SQL is disabled; use the Coop service API"

#: The SQL function the fence triggers call. Only connections the owner opens register it, so a
#: raw writer elsewhere fails with `no such function: coop_owner_service_required`.
FENCE_FUNCTION = "coop_owner_service_required"

F = TypeVar("F", bound=Callable[..., Any])

#: Every routed verb by its method name: the owner service runs only these.
ROUTED: dict[str, Callable[..., Any]] = {}

#: The routed verbs that change nothing. Their filings keep no answer, and a read the owner
#: never answered leaves nothing to reconcile, so its receipt settles at once.
READ_METHODS = frozenset({"list_items", "history", "rows", "counts", "status_snapshot"})


class OwnerContext(NamedTuple):
    """The owner's request context: the connection every verb in it borrows, and who asked.

    A NamedTuple, not a dataclass: this module is on the CLI's cold-start path."""

    connection: sqlite3.Connection
    key: str | None = None
    metadata: Mapping[str, Any] | None = None


_CONTEXT: contextvars.ContextVar[OwnerContext | None] = contextvars.ContextVar(
    "coop_owner_context", default=None
)


@contextmanager
def owner_context(context: OwnerContext) -> Iterator[OwnerContext]:
    """Run the block as the owner: `routed` steps aside, `connection()` lends its connection."""
    token = _CONTEXT.set(context)
    try:
        yield context
    finally:
        _CONTEXT.reset(token)


def current() -> OwnerContext | None:
    return _CONTEXT.get()


def borrowed() -> sqlite3.Connection | None:
    """The owner's connection when running inside its request context, else None."""
    context = _CONTEXT.get()
    return context.connection if context is not None else None


def register_fence_function(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Mark a connection as the owner's: the fence triggers let its writes through."""
    conn.create_function(FENCE_FUNCTION, 0, _owner_marker, deterministic=True)
    return conn


def _owner_marker() -> int:
    return 1


def owner_file_path(db: Path, environ: Mapping[str, str] | None = None) -> Path:
    """`COOP_OWNER_FILE`, else `<store>.owner.json` beside the database."""
    env = os.environ if environ is None else environ
    if env.get(OWNER_FILE_ENV):
        return Path(env[OWNER_FILE_ENV]).expanduser()
    return Path(str(db) + OWNER_FILE_SUFFIX)


def owner_config(db: Path | None = None) -> dict[str, Any] | None:
    """The owner file governing `db`, validated; None in local mode (no file).

    Raises before anything is routed or opened: `OwnerUnavailable(INVALID_OWNER)`, exactly
    those words, for any broken file; `.detail` says what was wrong.
    """
    db = Path(db) if db is not None else configured_db_path()
    path = owner_file_path(db)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None  # no owner file can be there: local mode
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(f"{path} cannot be read: {exc}") from exc
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise _invalid(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise _invalid(f"{path} is not a JSON object")
    if config.get("mode") != SERVICE_MODE:
        raise _invalid(f"mode must be 'service' in {path}")
    governed = config.get("database")
    if not isinstance(governed, str) or not governed:
        raise _invalid(f"{path} names no database")
    if Path(governed).resolve() != db.resolve():
        raise _invalid(f"{path} governs another database")
    return config


def _invalid(detail: str) -> OwnerUnavailable:
    """The design's exact words, and what exactly was wrong as the detail (its own line)."""
    return OwnerUnavailable(INVALID_OWNER, detail=detail)


def routed(fn: F) -> F:
    """Ship the call to the owner when an owner file says so; run it here otherwise.

    Inside the owner's request context the function always runs here, on the borrowed
    connection: that is the one place the owner's domain code executes.
    """
    name = fn.__name__
    if name in ROUTED:
        raise RuntimeError(f"two routed verbs are named {name}")  # the owner dispatches by name
    ROUTED[name] = fn

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _CONTEXT.get() is not None:
            return fn(*args, **kwargs)
        db_arg = kwargs.get("db")
        db = Path(db_arg) if db_arg is not None else configured_db_path()
        config = owner_config(db)
        if config is None:
            return fn(*args, **kwargs)
        # Imported here: urllib stays off the CLI's import path in local mode.
        from engine import compat

        shipped = {k: v for k, v in kwargs.items() if k != "db"}  # the owner uses its own
        return compat.remote(name, list(args), shipped, config)

    return call  # type: ignore[return-value]
