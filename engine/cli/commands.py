"""What each `coop` command does. A verb's command is run by one runner (`run_verb`), derived
from the verb's signature and the `@command` beside it: it calls the verb's public function
(`engine.api.public`) with the parsed arguments and prints the answer (`engine.cli.render`), or
the answer itself with `--json`. The operator's commands that run no verb (`status`, `cutover`,
`reconcile`, and `backup` and `restore`, which copy files rather than use the ledger) have a
handler each, in `COMMANDS`. `run` returns the verb's answer (for tests).
"""

from __future__ import annotations

import json
import os
import sys

from engine import api, lifecycle, store
from engine.cli import render, tree
from engine.config import ledger_origin
from engine.errors import NeedsAPerson, UsageError
from engine.verbs.declare import cli_of
from plumbing import terminal

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from types import SimpleNamespace
    from typing import Any

    #: A parsed command line: argparse's, or the quick parse's (`engine.cli.tree`).
    Args = argparse.Namespace | SimpleNamespace
    Emit = Callable[[str], None]
    Handler = Callable[[Args, Emit], "dict[str, Any] | None"]

    from engine.cli.tree import Command


def _actor(args: Args) -> str:
    actor = getattr(args, "actor", None)
    return lifecycle.require_actor(actor if actor is not None else os.environ.get("COOP_ACTOR"))


def _operator(args: Args) -> str:
    actor = getattr(args, "actor", None) or os.environ.get("COOP_ACTOR") or "operator"
    return lifecycle.require_actor(actor)


def _db(args: Args) -> str | None:
    return getattr(args, "db", None)


def printer(args: Args, emit: Emit) -> Emit:
    """`emit`, through the one rule for what reaches a terminal (`plumbing.terminal`): a human
    line escaped whole (a newline in a title must not forge the next line); a `--json` document
    keeps its layout's newlines and reads back exactly (a line of it that is no JSON, as a
    receipt line printed before a refusal, is escaped as a human line is)."""
    if getattr(args, "json", False):
        return lambda text: emit(
            "\n".join(map(terminal.shown, terminal.shown_json(text).split("\n")))
        )
    return lambda text: emit(terminal.shown(text))


# ---- the verbs: one runner, derived from each verb's signature and `@command` -------------


def _call(verb: Callable[..., Any], args: Args) -> tuple[list[Any], dict[str, Any]]:
    """The public call a command line makes: the verb's parameters, by name, from the parse
    (`actor` from `--as` or `$COOP_ACTOR`, `db` from `--db`)."""
    code = verb.__code__
    positional = code.co_varnames[1 : code.co_argcount]
    keywords = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    values = vars(args)
    given: dict[str, Any] = {}
    for name in (*positional, *keywords):
        if name == "actor":
            given[name] = _actor(args)
        elif name == "db":
            given[name] = _db(args)
        elif name in values:
            given[name] = values[name]
    return [given.pop(name) for name in positional if name in given], given


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _wait_stoppable(call: Callable[[], Any]) -> Any:
    """Run a wait so that SIGTERM (`timeout 60 coop request wait 7`, a service manager) stops it
    the way Ctrl-C does: its socket removed, exit 143. A SIGTERM the caller ignores or handles
    stays theirs, and the default comes back once the wait is over (an in-process caller of
    `main`, the argv fuzz, keeps its own)."""
    import signal

    try:
        ours = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        if ours:
            signal.signal(signal.SIGTERM, _stop)
    except ValueError:  # not the main thread: signals are the main thread's to handle
        ours = False
    try:
        return call()
    finally:
        if ours:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def run_verb(command: Command, args: Args, emit: Emit) -> Any:
    """Run a verb's command: call its public function, print its answer."""
    verb = command.verb
    assert verb is not None
    positional, keywords = _call(verb, args)
    public = api.public(verb)
    if verb.__dict__.get("waits"):
        answer = _wait_stoppable(lambda: public(*positional, **keywords))
    else:
        answer = public(*positional, **keywords)
    if getattr(args, "json", False):
        emit(json.dumps(answer, indent=2))
        return answer
    cli = cli_of(verb)
    says = cli.says if cli is not None else None
    arguments = {**dict(zip(verb.__code__.co_varnames[1:], positional, strict=False)), **keywords}
    for line in render.answer(args.group, answer, says, arguments):
        emit(line)
    return answer


# ---- the operator's commands --------------------------------------------------------------


def status(args: Args, emit: Emit) -> None:
    from engine import status
    from engine.errors import OwnerUnavailable, UsageError
    from plumbing.door import retired_setting

    retired = retired_setting(os.environ)
    if retired is not None:
        # A setting that named a TCP door: said once, before anything is asked anywhere.
        raise UsageError(retired)
    max_age_s = status.max_pending_age(args.max_pending_age)
    pending = status.uncertain_receipts()
    try:
        snapshot = status.status_snapshot(db=_db(args))
    except OwnerUnavailable:
        # The receipts are this machine's own: show them even when the owner cannot answer,
        # since that is exactly when someone needs them; then fail with the owner's words.
        for receipt in pending:
            emit(f"uncertain receipt {receipt['key']}  {receipt['method']}")
        raise
    report = {
        **snapshot,
        "uncertain_receipts": pending,
        "door": status.door_status(),
        "owner_service": status.owner_service(_db(args)),
    }
    found = status.problems(report, max_age_s)
    if args.json:
        emit(json.dumps({**report, "problems": found}, indent=2))
    else:
        for line in render.status_lines(report):
            emit(line)
        for line in found:
            emit(f"needs a person: {line}")
        emit(render.verdict_line(found))
    if args.check and found:
        raise NeedsAPerson


def cutover(args: Args, emit: Emit) -> None:
    from engine.owner import cutover

    if args.undo:
        for line in cutover.undo(actor=_operator(args), db=_db(args)):
            emit(line)
        return
    for line in render.cutover_lines(
        cutover.cutover(args.socket, actor=_operator(args), db=_db(args))
    ):
        emit(line)


def reconcile(args: Args, emit: Emit) -> None:
    from engine import owner, store
    from engine.owner import compat, receipts

    config = owner.owner_config(store.locate(_db(args)))
    if config is None:
        raise UsageError(
            "no owner file: reconcile asks the owner service, and this ledger is in local mode"
        )
    for line in render.reconcile_lines(args.key, compat.reconcile(args.key, config)):
        emit(line)
    receipts.prune()


def backup(args: Args, emit: Emit) -> None:
    from engine import backup

    for line in backup.backup(args.dir, db=_db(args)):
        emit(line)


def restore(args: Args, emit: Emit) -> None:
    from engine import backup

    for line in backup.restore(args.dir, db=_db(args), with_chief=args.with_chief):
        emit(line)


#: The operator's commands, which run no verb of their own (`serve` is the engine service's
#: process, not a command here). Every verb's command is derived (`engine.cli.tree`).
COMMANDS: dict[tuple[str, str | None], Handler] = {
    ("status", None): status,
    ("cutover", None): cutover,
    ("reconcile", None): reconcile,
    ("backup", None): backup,
    ("restore", None): restore,
}


def run(args: Args, emit: Emit) -> Any:
    """Run the command `args` names: a verb's, or one of the operator's; every line it prints
    goes through `printer`."""
    emit = printer(args, emit)
    words = (args.group, getattr(args, "verb", None))
    command = tree.COMMANDS[words]
    ledger = store.locate(_db(args))
    existed = os.path.exists(ledger)
    try:
        if command.verb is not None:
            return run_verb(command, args, emit)
        return COMMANDS[words](args, emit)
    finally:
        if not existed and os.path.exists(ledger):
            # Only a command that writes gets here (a read refuses first, creating nothing):
            # one line, the first time, so a wrong COOP_HOME is seen at once, not weeks later.
            print(
                terminal.shown(
                    f"coop: started a new ledger at {ledger} ({ledger_origin(_db(args))})"
                ),
                file=sys.stderr,
            )
