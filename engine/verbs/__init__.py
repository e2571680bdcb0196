"""The use cases: one function per verb, run on a transaction handed in (`Unit`), holding the
state change, its event row and, where the change is reportable, its outbox row.

    engine.verbs.unit     what a verb runs on (`Unit`: the transaction, the settings)
    engine.verbs.declare  what the `coop` CLI needs beside a verb's signature (`@command`),
                          which verbs only read (`@reads`) and which are a wait's look
                          (`@waits`)
    engine.verbs.ledger   todos and requests: add, take, release, done/close, abandon; show,
                          list, history; one look of a request's wait (`@waits`)
    engine.verbs.outbox   notify, cancel, retry, the owner's worker unlock; the rows and the
                          snapshot `coop status` shows
    engine.verbs.phone    the owner's answer from the phone and the phone's summary: run by
                          the owner service's phone routes only, so not in `VERBS` (no
                          command, no public function, not routed)
    engine.verbs.deadline the ledger's own decision when a request's deadline passes, and
                          which deadlines are due: run by the notifier daemon only, so not
                          in `VERBS` either
    (here)                every verb by its name, for the callers that receive a name (the
                          owner's command log), and which of them only read

A verb's function is the one source of the verb: its typed signature and docstring are the
public function's (`engine.api` derives it), what the owner service checks a routed call
against (`engine.owner.arguments`), and, with the `@command` written beside it, the `coop`
command (`engine.cli.tree` derives the command tree, its quick parse and `--help`).

A verb knows nothing of where it runs: no SQL text (that is `engine.store`), no environment
(its caller hands in the settings), no routing (`engine.api` decides local or owner service;
the owner's command log runs the same functions on its own connection). Its caller opens the
transaction and commits it when the verb returns, or rolls it back when the verb raises.

Every verb takes JSON-plain arguments and returns a JSON-plain dict, so the owner service can
run it for a remote caller and ship the answer back unchanged. A verb is a public function of
a verb module whose first parameter is the `Unit`; `VERBS` below finds them, so a new verb is
written once, in its module. Its public name for library callers is one line in
`engine.ledger` or `engine.outbox` (`public(verb)`), the name mypy checks callers by;
tests/integration/owner/test_every_verb_everywhere.py fails naming a verb without one.
"""

from __future__ import annotations

from engine.verbs import ledger, outbox
from engine.verbs.unit import Row, Unit

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _verbs_of(module: object) -> dict[str, Callable[..., Any]]:
    """The verbs a module defines, in its order: its public functions that take the `Unit`."""
    found: dict[str, Callable[..., Any]] = {}
    for name, fn in vars(module).items():
        code = getattr(fn, "__code__", None)
        if (
            not name.startswith("_")
            and code is not None
            and fn.__module__ == getattr(module, "__name__", None)
            and code.co_argcount >= 1
            and code.co_varnames[0] == "unit"
        ):
            found[name] = fn
    return found


#: Every verb by the name the compatibility client ships and the owner's command log runs, in
#: the order `coop --help` lists their commands.
VERBS: dict[str, Callable[..., Any]] = {**_verbs_of(ledger), **_verbs_of(outbox)}

#: The verbs that change nothing (`@reads`): run outside a write, their filings keep no answer.
READS = frozenset(name for name, fn in VERBS.items() if fn.__dict__.get("reads"))

__all__ = ["READS", "VERBS", "Row", "Unit"]
