"""The engine's public functions: the one edge that decides where a call runs.

Each public function reads the owner file once (`engine.owner.owner_config`) and then either

- ships the call to the owner service (`engine.owner.compat.remote`) when an owner file governs the
  database (a broken one fails closed before anything is opened or sent), or
- runs the verb here (`engine.verbs`) on one transaction of its own (`store.unit_of_work`),
  with the settings read from the environment, and kicks the notifier after the commit when
  the answer names an `outbox_id`: library callers wake it exactly as the CLI does.

The owner service never comes through here: its command log runs `engine.verbs` directly on
its own connection, inside the transaction that files the command, and kicks its in-process
daemon once that commits. So nothing ambient (no context variable, no registry filled as a
side effect of imports, no owner-file read inside the store) decides where code runs.

`engine.ledger` and `engine.outbox` name these same functions for library callers.
"""

from __future__ import annotations

import functools
import sys

from engine import kick, store, verbs
from engine.config import EngineConfig
from engine.errors import UsageError
from engine.owner_file import owner_config

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true. At run time `Row` is the plain `dict` it is, which is what
# `typing.get_type_hints` finds when the owner and the tests read the public signatures.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])
    Row = dict[str, Any]
else:
    Row = dict


def _run(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one public call: at the owner when an owner file says so, here otherwise."""
    shipped = dict(kwargs)
    db = shipped.pop("db", None)  # the owner runs every call on its own database
    path = store.locate(db)
    route = owner_config(path)
    if route is not None:
        # Imported here: urllib stays off the CLI's import path in local mode.
        from engine.owner import compat

        return compat.remote(name, list(args), shipped, route)
    writing = name not in verbs.READS
    mode = None
    if writing:
        # A wrong COOP_KICK is refused before the verb runs, so nothing is written.
        try:
            mode = kick.kick_mode()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    with store.unit_of_work(path, writing=writing) as tx:
        unit = verbs.Unit(tx=tx, config=lambda: EngineConfig.from_env(db=path))
        result = verbs.VERBS[name](unit, *args, **shipped)
    if mode is not None and isinstance(result, dict) and result.get("outbox_id"):
        _kick(path, mode)
    return result


def _kick(path: str, mode: str) -> None:
    """Wake the notifier for the row just committed. A kick that fails does not turn a
    committed change into an error: the row is durable, and the caller is told on stderr how
    it will be delivered."""
    try:
        kick.kick(path, mode)
    except OSError as exc:
        print(
            f"coop: committed, but the notifier could not be woken ({exc}); the row"
            " waits for the daemon or the next `coop-notifier drain`",
            file=sys.stderr,
        )


def _public(fn: F) -> F:
    """The signature below is the contract (the owner checks shipped arguments against it);
    the body never runs: every call goes through `_run` under the function's name."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        return _run(name, args, kwargs)

    return call  # type: ignore[return-value]


# ---- the ledger ---------------------------------------------------------------------------


@_public
def add_todo(title: str, *, actor: str, body: str | None = None, db: str | None = None) -> Row:
    raise NotImplementedError


@_public
def take_todo(todo_id: int, *, actor: str, force: bool = False, db: str | None = None) -> Row:
    raise NotImplementedError


@_public
def release_todo(todo_id: int, *, actor: str, reason: str, db: str | None = None) -> Row:
    raise NotImplementedError


@_public
def done_todo(
    todo_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
    db: str | None = None,
) -> Row:
    raise NotImplementedError


@_public
def abandon_todo(
    todo_id: int, *, actor: str, reason: str, force: bool = False, db: str | None = None
) -> Row:
    raise NotImplementedError


@_public
def add_request(
    title: str,
    *,
    actor: str,
    addressed_to: str | None = None,
    body: str | None = None,
    db: str | None = None,
) -> Row:
    raise NotImplementedError


@_public
def take_request(request_id: int, *, actor: str, force: bool = False, db: str | None = None) -> Row:
    raise NotImplementedError


@_public
def release_request(
    request_id: int, *, actor: str, reason: str | None = None, db: str | None = None
) -> Row:
    raise NotImplementedError


@_public
def close_request(
    request_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
    db: str | None = None,
) -> Row:
    raise NotImplementedError


@_public
def list_items(
    kind: str | None = None, *, include_closed: bool = False, db: str | None = None
) -> list[Row]:
    """Todos and/or requests, open and taken ones first by id; stale takes are marked."""
    raise NotImplementedError


@_public
def history(kind: str, item_id: int, *, db: str | None = None) -> list[Row]:
    """The event log of one todo or request, oldest first."""
    raise NotImplementedError


# ---- the outbox and the worker lock -------------------------------------------------------


@_public
def notify(text: str, *, actor: str, kind: str = "note", db: str | None = None) -> Row:
    """`coop notify TEXT`: an explicit notification, recorded as an event."""
    raise NotImplementedError


@_public
def cancel(outbox_id: int, *, actor: str, reason: str, db: str | None = None) -> Row:
    """An operator gives up on a row: it is never delivered, and the event says who and why."""
    raise NotImplementedError


@_public
def retry(outbox_id: int, *, actor: str, db: str | None = None) -> Row:
    """Make a deferred row due now (the next drain tries it first, in FIFO order)."""
    raise NotImplementedError


@_public
def unlock_worker(*, actor: str, reason: str, db: str | None = None) -> Row:
    """The owner clears the notifier's worker lock, whoever holds it, recorded as an event."""
    raise NotImplementedError


@_public
def rows(state: str | None = None, *, limit: int = 50, db: str | None = None) -> list[Row]:
    """Outbox rows, newest first, optionally of one state."""
    raise NotImplementedError


@_public
def status_snapshot(*, db: str | None = None) -> Row:
    """The ledger's and the outbox's state, read in one snapshot."""
    raise NotImplementedError


#: Every public function by the name the compatibility client ships and the owner runs: the
#: owner checks a call's arguments against these signatures, then runs `verbs.VERBS[name]`. One
#: public function per verb, by the verb's own name (a verb without one fails here, at import).
PUBLIC: dict[str, Callable[..., Any]] = {name: globals()[name] for name in verbs.VERBS}
