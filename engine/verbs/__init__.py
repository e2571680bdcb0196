"""The use cases: one function per verb, run on a transaction handed in (`Unit`), holding the
state change, its event row and, where the change is reportable, its outbox row.

    engine.verbs.unit     what a verb runs on (`Unit`: the transaction, the settings)
    engine.verbs.ledger   todos and requests: add, take, release, done/close, abandon; list,
                          history
    engine.verbs.outbox   notify, cancel, retry, the owner's worker unlock; the rows and the
                          snapshot `coop status` shows
    (here)                the registry: every verb by the name the API, the compatibility
                          client and the owner's command log use, and which of them only read

A verb knows nothing of where it runs: no SQL text (that is `engine.store`), no environment
(its caller hands in the settings), no routing (`engine.api` decides local or owner service;
the owner's command log runs the same functions on its own connection). Its caller opens the
transaction and commits it when the verb returns, or rolls it back when the verb raises.

Every verb takes JSON-plain arguments and returns a JSON-plain dict, so the owner service can
run it for a remote caller and ship the answer back unchanged. Each takes the `Unit` first,
then exactly the arguments of its public function in `engine.api` (whose `PUBLIC` is derived
from `VERBS` below, so a verb without a public function fails at import).
"""

from __future__ import annotations

from engine.verbs.ledger import (
    abandon_todo,
    add_request,
    add_todo,
    close_request,
    done_todo,
    history,
    list_items,
    release_request,
    release_todo,
    take_request,
    take_todo,
)
from engine.verbs.outbox import (
    cancel,
    notify,
    retry,
    rows,
    status_snapshot,
    unlock_worker,
)
from engine.verbs.unit import Row, Unit

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

#: Every verb by the name the API, the compatibility client and the owner's command log use.
VERBS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (
        add_todo,
        take_todo,
        release_todo,
        done_todo,
        abandon_todo,
        add_request,
        take_request,
        release_request,
        close_request,
        list_items,
        history,
        notify,
        cancel,
        retry,
        unlock_worker,
        rows,
        status_snapshot,
    )
}

#: The verbs that change nothing: run outside a write, their owner filings keep no answer.
READS = frozenset({"list_items", "history", "rows", "status_snapshot"})

__all__ = ["READS", "VERBS", "Row", "Unit", *VERBS]
