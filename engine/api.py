"""The engine's public functions: the one edge that decides where a call runs.

A public function is derived from its verb (`public(verb)`), with the verb's own signature less
the `Unit` its caller hands in: mypy checks every library caller against it, and `db=` names
the ledger file. `engine.ledger` and `engine.outbox` hold the public functions, one line each,
by the verbs' names. Each call reads the owner file once (`engine.owner.owner_config`) and
then either

- ships the call to the owner service (`engine.owner.compat.remote`) when an owner file governs the
  database (a broken one fails closed before anything is opened or sent), or
- runs the verb here on one transaction of its own (`store.unit_of_work`), with the settings
  read from the environment, and, after the commit, kicks the notifier when the answer names an
  `outbox_id` and wakes the waiters of a request the answer shows settled
  (`engine.kick.after_commit`): library callers wake both exactly as the CLI does.

A waiting verb (`@waits`: `wait_request`) is one look, repeated here (`_wait`): the waiter's
socket is bound beside the store first (`engine.kick.Waiter`), then each look runs as above
(a read of its own, or a routed call after a cutover) and the wait between looks blocks on
the socket, holding no transaction and no connection, until a settling commit's datagram or the
timeout.

The owner service never comes through here: its command log runs `engine.verbs` directly on
its own connection, inside the transaction that files the command, and kicks its in-process
daemon once that commits. So nothing ambient (no context variable, no registry filled as a
side effect of imports, no owner-file read inside the store) decides where code runs.
"""

from __future__ import annotations

import os
import sys
import time

from engine import kick, store
from engine.config import EngineConfig, ledger_origin
from engine.errors import NoLedger, TimedOut, UsageError
from engine.owner_file import owner_config
from engine.verbs.ledger import wait_timeout
from engine.verbs.unit import Unit
from plumbing.faults import fault

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import inspect
    from collections.abc import Callable
    from typing import Any, Concatenate, ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")


def _run(verb: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run one public call: at the owner when an owner file says so, here otherwise."""
    shipped = dict(kwargs)
    db = shipped.pop("db", None)  # the owner runs every call on its own database
    path = store.locate(db)
    route = owner_config(path)
    if route is not None:
        # Imported here: urllib stays off the CLI's import path in local mode.
        from engine.owner import compat

        return compat.remote(verb.__name__, list(args), shipped, route)
    writing = not verb.__dict__.get("reads")
    if not writing:
        require_ledger(path, db)
    mode = None
    if writing:
        # A wrong COOP_KICK is refused before the verb runs, so nothing is written.
        try:
            mode = kick.kick_mode()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    with store.unit_of_work(path, writing=writing) as tx:
        unit = Unit(tx=tx, config=lambda: EngineConfig.from_env(db=path))
        result = verb(unit, *args, **shipped)
    if mode is not None:
        _kick(path, result, mode)
    return result


def require_ledger(path: str, db: str | None) -> None:
    """A read opens an existing ledger or none: `NoLedger`, naming the path and the setting
    that named it, before anything is opened (opening would create the file and its folders,
    and a person with the wrong COOP_HOME would read an empty ledger as their todos gone)."""
    if not os.path.exists(path):
        raise NoLedger(
            f"no ledger at {path} ({ledger_origin(db)}): a read creates none; point COOP_HOME"
            " (or COOP_DB, --db) at the ledger, or start one with a command that writes"
        )


def _kick(path: str, result: Any, mode: str) -> None:
    """Wake the notifier for the row just committed, and the waiters of a request it settled.
    A kick that fails does not turn a committed change into an error: the row is durable, and
    the caller is told on stderr how it will be delivered."""
    try:
        kick.after_commit(path, result, mode)
    except OSError as exc:
        print(
            f"coop: committed, but the notifier could not be woken ({exc}); the row"
            " waits for the daemon or the next `coop-notifier drain`",
            file=sys.stderr,
        )


def _wait(verb: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a waiting verb: bind the waiter's socket, THEN look (a settling commit is either
    before the look, which sees it, or after the bind, whose datagram ends the wait at once),
    and look again after each wake until the request is settled or `timeout_s` has passed."""
    timeout_s = wait_timeout(kwargs.get("timeout_s"))
    request_id = args[0] if args else kwargs.get("request_id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise UsageError(f"request id {request_id!r} is not a whole number")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    path = store.locate(kwargs.get("db"))
    if owner_config(path) is None:
        require_ledger(path, kwargs.get("db"))  # before the waiter's socket folder is made
    with kick.Waiter(path, request_id) as waiter:
        fault("engine.wait.bound")  # test-only seam: a close between the bind and the look
        while True:
            answer = _run(verb, args, kwargs)
            if kick.settled_request(answer) == request_id:
                return answer
            fault("engine.wait.looked")  # test-only seam: a close between a look and the wait
            left = kick.Waiter.RECHECK_S if deadline is None else deadline - time.monotonic()
            if left <= 0 or (
                not waiter.wait(left) and deadline is not None and time.monotonic() >= deadline
            ):
                raise TimedOut(f"request #{request_id} still open after {timeout_s:g} s")


class Public:
    """A verb as library callers call it: `take_todo(3, actor="builder", db=...)`. Its name,
    docstring and signature are the verb's, less the `Unit` (`inspect.signature` reads it,
    imported only when asked: the CLI's cold path never asks)."""

    def __init__(self, verb: Callable[..., Any]) -> None:
        self.verb = verb
        self.__name__ = self.__qualname__ = verb.__name__
        self.__module__ = verb.__module__
        self.__doc__ = verb.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.verb.__dict__.get("waits"):
            return _wait(self.verb, args, kwargs)
        return _run(self.verb, args, kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        import inspect

        signature = inspect.signature(self.verb)
        return signature.replace(parameters=list(signature.parameters.values())[1:])

    def __repr__(self) -> str:
        return f"<public {self.__name__}>"


def public(verb: Callable[Concatenate[Unit, P], R]) -> Callable[P, R]:
    """The public function of `verb`: the same parameters but the `Unit`, run where the owner
    file says (`_run`)."""
    return Public(verb)  # type: ignore[return-value]
