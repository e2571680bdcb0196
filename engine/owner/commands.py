"""The owner's command log (`coop_commands`): run a verb once per request key, filed.

`run()` opens one `BEGIN IMMEDIATE` transaction on the owner's connection, looks the key up,
and either answers from the filing (same key, same input SHA-256: the filed outcome, without
running again) or runs the verb (`engine.verbs`, handed the owner's connection) in a savepoint
of that transaction and files the outcome in the same transaction: a refused verb rolls back
its own changes, and the filing commits with the change or not at all. So a committed
change always has its filing, and a filing always has its change; `coop reconcile KEY` gets one
true answer.

    outcome        meaning
    committed      the verb ran and its change committed (`result` holds its answer)
    rejected       the verb refused with a domain error (its type and words are filed)
    never_arrived  `reconcile` asked first: filed so a late copy of the request is refused

Reads (`engine.verbs.READS`) run outside any write transaction (a read may take its own read
snapshot, and must not hold the write lock) and are filed afterwards without their answer; a
repeated read key runs the read again, which changes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine import store, verbs
from engine.config import EngineConfig
from engine.errors import CommandRefused, CoopError, KeyConflict, StoreError
from engine.owner import arguments
from engine.store import commands as command_log

COMMITTED, REJECTED, NEVER_ARRIVED = "committed", "rejected", "never_arrived"
READ_METHODS = verbs.READS


@dataclass(frozen=True)
class Filed:
    """One command's filed outcome, as the owner answers it."""

    key: str
    method: str
    outcome: str
    result: Any = None
    error_type: str | None = None
    error_message: str | None = None
    replayed: bool = False

    def answer(self) -> dict[str, Any]:
        error = (
            {"type": self.error_type, "message": self.error_message}
            if self.outcome == REJECTED
            else None
        )
        return {
            "key": self.key,
            "method": self.method,
            "outcome": self.outcome,
            "result": self.result,
            "error": error,
            "replayed": self.replayed,
        }


def lookup(conn: sqlite3.Connection, key: str) -> sqlite3.Row | None:
    return command_log.lookup(conn, key)


def _filed(row: sqlite3.Row, replayed: bool) -> Filed:
    return Filed(
        key=row["key"],
        method=row["method"],
        outcome=row["outcome"],
        result=json.loads(row["result"]) if row["result"] is not None else None,
        error_type=row["error_type"],
        error_message=row["error_message"],
        replayed=replayed,
    )


def _file(
    conn: sqlite3.Connection,
    key: str,
    method: str,
    digest: str,
    actor: str | None,
    metadata: dict[str, Any],
    outcome: str,
    result: Any = None,
    error: CoopError | None = None,
) -> None:
    command_log.file(
        conn,
        key,
        method,
        digest,
        actor,
        json.dumps(metadata, sort_keys=True),
        outcome,
        None if result is None or method in READ_METHODS else json.dumps(result),
        type(error).__name__ if error is not None else None,
        error.message if error is not None else None,
    )


def _verb(method: str, args: list[Any], kwargs: dict[str, Any]) -> Callable[..., Any]:
    """The verb to run, once the call's arguments fit its signature (the verb's own, less the
    unit the owner hands in itself and the `db` it refuses)."""
    fn = verbs.VERBS.get(method)
    if fn is None:
        raise CommandRefused(f"{method!r} is not a Coop operation the owner runs")
    if "db" in kwargs:
        raise CommandRefused("the owner runs every operation on its own database; drop 'db'")
    arguments.check(method, fn, args, kwargs)  # ArgumentError, a CommandRefused
    return fn


def _unit(conn: sqlite3.Connection) -> verbs.Unit:
    # The owner's settings are read per call, as a local caller's are: a wrong setting is a
    # verdict on the call that needs it, not a stop of the service.
    return verbs.Unit(tx=lambda: conn, config=EngineConfig.from_env)


def run(
    conn: sqlite3.Connection,
    *,
    key: str,
    method: str,
    args: list[Any],
    kwargs: dict[str, Any],
    digest: str,
    metadata: dict[str, Any],
) -> Filed:
    """Run `method` once for `key` on the owner's connection and file its outcome."""
    fn = _verb(method, args, kwargs)
    actor = kwargs.get("actor") if isinstance(kwargs.get("actor"), str) else None
    if method in READ_METHODS:
        return _run_read(conn, key, metadata, fn, method, args, kwargs, digest, actor)
    with store.write(conn):
        row = _check_key(lookup(conn, key), key, digest)
        if row is not None:
            return _filed(row, replayed=True)
        # The verb's own savepoint: a refusal undoes exactly its changes.
        try:
            with store.write(conn):
                result = fn(_unit(conn), *args, **kwargs)
        except StoreError:
            # The database failed (a full disk): no verdict, and SQLite may already have
            # ended this transaction. File nothing; the caller's receipt stays uncertain
            # and a reconcile answers what really happened.
            raise
        except CoopError as exc:
            _file(conn, key, method, digest, actor, metadata, REJECTED, error=exc)
            return Filed(key, method, REJECTED, None, type(exc).__name__, exc.message)
        _file(conn, key, method, digest, actor, metadata, COMMITTED, result=result)
        return Filed(key, method, COMMITTED, result)


def _check_key(row: sqlite3.Row | None, key: str, digest: str) -> sqlite3.Row | None:
    if row is not None and row["outcome"] == NEVER_ARRIVED:
        raise KeyConflict(
            f"request {key} was reconciled as never arrived; send it again (a new key)"
        )
    if row is not None and row["input_sha256"] != digest:
        raise KeyConflict(f"request {key} was already filed for another input")
    return row


def _run_read(
    conn: sqlite3.Connection,
    key: str,
    metadata: dict[str, Any],
    fn: Callable[..., Any],
    method: str,
    args: list[Any],
    kwargs: dict[str, Any],
    digest: str,
    actor: str | None,
) -> Filed:
    """A read runs outside any write transaction (it may take its own read snapshot, and it
    should not hold the write lock); its filing is a separate short write. A repeated key
    reads again, which changes nothing."""
    with store.write(conn):
        row = _check_key(lookup(conn, key), key, digest)
    try:
        with store.snapshot(conn):  # one read for every figure of the answer
            result = fn(_unit(conn), *args, **kwargs)
        filed = Filed(key, method, COMMITTED, result, replayed=row is not None)
        error = None
    except StoreError:
        raise
    except CoopError as exc:
        error = exc
        filed = Filed(key, method, REJECTED, None, type(exc).__name__, exc.message)
    if row is None:
        with store.write(conn):
            _file(
                conn,
                key,
                method,
                digest,
                actor,
                metadata,
                filed.outcome,
                error=error,
            )
    return filed


def reconcile(conn: sqlite3.Connection, key: str) -> dict[str, Any]:
    """What became of `key`; an unknown key is filed `never_arrived` so it can never run later."""
    with store.write(conn):
        row = lookup(conn, key)
        if row is None:
            _file(conn, key, "?", "", None, {"reconciled": True}, NEVER_ARRIVED)
            return {"key": key, "found": False, "outcome": NEVER_ARRIVED}
        return {
            "key": key,
            "found": row["outcome"] != NEVER_ARRIVED,
            "method": row["method"],
            "input_sha256": row["input_sha256"],
            "outcome": row["outcome"],
            "error": (
                {"type": row["error_type"], "message": row["error_message"]}
                if row["outcome"] == REJECTED
                else None
            ),
            "filed_at": row["filed_at"],
        }
