"""What each `coop` command does: one small handler per command, found in one table (`COMMANDS`,
keyed by group and verb), each calling the public API (`engine.api`) and emitting its lines
(`engine.cli.render`). A handler returns the API's answer when it has one worth returning (for
tests), else None.
"""

from __future__ import annotations

import json
import os

from engine import api, lifecycle
from engine.cli import render
from engine.errors import CoopError, UsageError

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


class NeedsAPerson(CoopError):
    """`coop status --check` found something that needs a person."""


def _actor(args: Args) -> str:
    actor = getattr(args, "actor", None)
    return lifecycle.require_actor(actor if actor is not None else os.environ.get("COOP_ACTOR"))


def _operator(args: Args) -> str:
    actor = getattr(args, "actor", None) or os.environ.get("COOP_ACTOR") or "operator"
    return lifecycle.require_actor(actor)


def _db(args: Args) -> str | None:
    return getattr(args, "db", None)


# ---- todos and requests -------------------------------------------------------------------


def todo_add(args: Args, emit: Emit) -> None:
    actor = _actor(args)
    result = api.add_todo(args.title, actor=actor, body=args.body, db=_db(args))
    emit(render.describe("todo", result, "added"))


def todo_take(args: Args, emit: Emit) -> dict[str, Any]:
    actor = _actor(args)
    result = api.take_todo(args.id, actor=actor, force=args.force, db=_db(args))
    emit(render.describe("todo", result, f"taken by {actor}"))
    return result


def todo_release(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.release_todo(args.id, actor=_actor(args), reason=args.reason, db=_db(args))
    emit(render.describe("todo", result, "released"))
    return result


def todo_done(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.done_todo(
        args.id,
        actor=_actor(args),
        result_summary=args.summary,
        commit_sha=args.commit,
        force=args.force,
        db=_db(args),
    )
    emit(render.describe("todo", result, "done"))
    return result


def todo_abandon(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.abandon_todo(
        args.id, actor=_actor(args), reason=args.reason, force=args.force, db=_db(args)
    )
    emit(render.describe("todo", result, "abandoned"))
    return result


def request_add(args: Args, emit: Emit) -> None:
    actor = _actor(args)
    result = api.add_request(
        args.title, actor=actor, addressed_to=args.addressed_to, body=args.body, db=_db(args)
    )
    emit(render.describe("request", result, "added"))


def request_take(args: Args, emit: Emit) -> dict[str, Any]:
    actor = _actor(args)
    result = api.take_request(args.id, actor=actor, force=args.force, db=_db(args))
    emit(render.describe("request", result, f"taken by {actor}"))
    return result


def request_release(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.release_request(args.id, actor=_actor(args), reason=args.reason, db=_db(args))
    emit(render.describe("request", result, "released"))
    return result


def request_close(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.close_request(
        args.id,
        actor=_actor(args),
        result_summary=args.summary,
        commit_sha=args.commit,
        force=args.force,
        db=_db(args),
    )
    emit(render.describe("request", result, "closed"))
    return result


def list_(args: Args, emit: Emit) -> None:
    items = api.list_items(args.kind, include_closed=args.all, db=_db(args))
    if args.json:
        emit(json.dumps(items, indent=2))
        return
    for item in items:
        emit(render.format_item(item))
    if not items:
        emit("nothing open" if not args.all else "nothing yet")


def history(args: Args, emit: Emit) -> None:
    events = api.history(args.kind, args.id, db=_db(args))
    if args.json:
        emit(json.dumps(events, indent=2))
        return
    for event in events:
        emit(render.event_line(event))


# ---- the outbox and the worker lock -------------------------------------------------------


def notify(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.notify(args.text, actor=_actor(args), kind=args.kind, db=_db(args))
    emit(f"notification #{result['outbox_id']} queued")
    return result


def outbox_list(args: Args, emit: Emit) -> None:
    rows = api.rows(args.state, limit=args.limit, db=_db(args))
    if args.json:
        emit(json.dumps(rows, indent=2))
        return
    for row in rows:
        emit(render.outbox_line(row))


def outbox_retry(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.retry(args.id, actor=_actor(args), db=_db(args))
    emit(f"notification #{args.id} is due now")
    return result


def outbox_cancel(args: Args, emit: Emit) -> None:
    api.cancel(args.id, actor=_actor(args), reason=args.reason, db=_db(args))
    emit(f"notification #{args.id} cancelled")


def worker_unlock(args: Args, emit: Emit) -> dict[str, Any]:
    result = api.unlock_worker(actor=_actor(args), reason=args.reason, db=_db(args))
    emit(render.unlocked_line(result["unlocked"]))
    return result


# ---- the operator's commands --------------------------------------------------------------


def status(args: Args, emit: Emit) -> None:
    from engine import status
    from engine.errors import OwnerUnavailable

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
    report = {**snapshot, "uncertain_receipts": pending, "door": status.door_status()}
    found = status.problems(report, max_age_s)
    if args.json:
        emit(json.dumps({**report, "problems": found}, indent=2))
    else:
        for line in render.status_lines(report):
            emit(line)
        for line in found:
            emit(f"needs a person: {line}")
    if args.check and found:
        raise NeedsAPerson


def cutover(args: Args, emit: Emit) -> None:
    from engine.owner import cutover

    if args.undo:
        for line in cutover.undo(actor=_operator(args), db=_db(args)):
            emit(line)
        return
    for line in render.cutover_lines(
        cutover.cutover(args.url, actor=_operator(args), db=_db(args))
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


#: Every command but `serve` (which is the engine service's process, not a verb here).
COMMANDS: dict[tuple[str, str | None], Handler] = {
    ("todo", "add"): todo_add,
    ("todo", "take"): todo_take,
    ("todo", "release"): todo_release,
    ("todo", "done"): todo_done,
    ("todo", "abandon"): todo_abandon,
    ("request", "add"): request_add,
    ("request", "take"): request_take,
    ("request", "release"): request_release,
    ("request", "close"): request_close,
    ("list", None): list_,
    ("history", None): history,
    ("notify", None): notify,
    ("outbox", "list"): outbox_list,
    ("outbox", "retry"): outbox_retry,
    ("outbox", "cancel"): outbox_cancel,
    ("worker", "unlock"): worker_unlock,
    ("status", None): status,
    ("cutover", None): cutover,
    ("reconcile", None): reconcile,
}


def run(args: Args, emit: Emit) -> dict[str, Any] | None:
    """Run the command `args` names."""
    return COMMANDS[(args.group, getattr(args, "verb", None))](args, emit)
