"""`coop`: the ledger from a shell.

Each invocation is a process start, so this module and everything it imports at the top stays
on the standard library and the engine: no httpx, structlog or FastAPI on a verb's path.
Usage errors (a missing actor, an unknown id, an empty title, a missing reason) print one line
on stderr and exit 2; a lifecycle refusal prints its reason and exits 1; nothing is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from engine import api, lifecycle
from engine.errors import CoopError, UsageError
from engine.store.queue import STATES as OUTBOX_STATES

PROG = "coop"


class _Formatter(argparse.HelpFormatter):
    """Help text as wide as `$COLUMNS` (default 100) without importing shutil to ask the tty:
    argparse builds a formatter for every argument it adds, and shutil costs a cold start ~4 ms."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        super().__init__(prog, width=(int(columns) if columns.isdigit() else 100) - 2)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming where to look."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coop-notifier")
    except PackageNotFoundError:
        return "unknown"


class _Version(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{PROG} {_version()}")
        parser.exit(0)


GROUP_HELP: dict[str, str] = {
    "todo": "add, take, release, finish or abandon a todo",
    "request": "add, take, release or close a request",
    "list": "list todos and requests",
    "history": "the event log of one row",
    "notify": "queue a line for the owner",
    "outbox": "inspect, retry or cancel notification rows",
    "worker": "the notifier's worker lock: the owner clears a stuck holder",
    "serve": "run the engine service (owner+notifier)",
    "status": "ledger, outbox, worker lock, receipts and the door, for an operator",
    "cutover": "make the owner service the only writer, or undo it",
    "reconcile": "ask the owner what became of a request key",
}


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The whole command tree; given `argv`, only the group it names gets its arguments (the
    others stay one-line stubs for --help), since building every subparser costs a cold start
    several milliseconds."""
    words = list(argv or ())
    while words[:1] in (["--as"], ["--db"]):  # a top-level option and its value
        del words[:2]
    positional = [word for word in words if not word.startswith("-")]
    wanted = positional[0] if positional else None
    common = Parser(add_help=False)
    # SUPPRESS: `coop --as X todo take 1` and `coop todo take 1 --as X` both work; a subparser's
    # default must not overwrite what the top level already read.
    common.add_argument(
        "--as", dest="actor", default=argparse.SUPPRESS, help="who is acting (default: $COOP_ACTOR)"
    )
    common.add_argument(
        "--db", default=argparse.SUPPRESS, help="the ledger file (default: $COOP_DB)"
    )

    parser = Parser(
        prog=PROG,
        description="The Coop ledger: todos and requests with guarded lifecycles.",
        parents=[common],
    )
    parser.add_argument("--version", nargs=0, action=_Version, help="print the version")
    groups = parser.add_subparsers(dest="group", required=True, parser_class=Parser)
    for name, add in GROUPS.items():
        if wanted in GROUPS and name != wanted:
            groups.add_parser(name, help=GROUP_HELP[name])  # a stub: listed in --help only
        else:
            add(groups, common)
    return parser


def _todo_parser(groups: Any, common: Parser) -> None:
    todo = groups.add_parser("todo", help=GROUP_HELP["todo"])
    todo_verbs = todo.add_subparsers(dest="verb", required=True, parser_class=Parser)
    p = todo_verbs.add_parser("add", parents=[common], help="add an open todo")
    p.add_argument("title")
    p.add_argument("--body", default=None)
    p = todo_verbs.add_parser("take", parents=[common], help="take a todo to work on it")
    p.add_argument("id", type=int)
    p.add_argument("--force", action="store_true", help="take it over from its holder")
    p = todo_verbs.add_parser("release", parents=[common], help="give a taken todo back")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default=None, help="why (required)")
    p = todo_verbs.add_parser("done", parents=[common], help="finish a todo (or amend it)")
    p.add_argument("id", type=int)
    p.add_argument("--summary", default=None, help="what came of it")
    p.add_argument("--commit", default=None, help="the commit that did it")
    p.add_argument("--force", action="store_true", help="finish a todo someone else holds")
    p = todo_verbs.add_parser("abandon", parents=[common], help="give a todo up for good")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default=None, help="why (required)")
    p.add_argument("--force", action="store_true", help="abandon a todo someone else holds")


def _request_parser(groups: Any, common: Parser) -> None:
    request = groups.add_parser("request", help=GROUP_HELP["request"])
    request_verbs = request.add_subparsers(dest="verb", required=True, parser_class=Parser)
    p = request_verbs.add_parser("add", parents=[common], help="add an open request")
    p.add_argument("title")
    p.add_argument("--to", dest="addressed_to", default=None, help="the actor it is for")
    p.add_argument("--body", default=None)
    p = request_verbs.add_parser("take", parents=[common], help="take a request")
    p.add_argument("id", type=int)
    p.add_argument("--force", action="store_true", help="take it over from its holder")
    p = request_verbs.add_parser("release", parents=[common], help="give a taken request back")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default=None)
    p = request_verbs.add_parser("close", parents=[common], help="close a request (or amend it)")
    p.add_argument("id", type=int)
    p.add_argument("--summary", default=None)
    p.add_argument("--commit", default=None)
    p.add_argument("--force", action="store_true", help="close a request someone else holds")


def _list_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser("list", parents=[common], help=GROUP_HELP["list"])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--todos", action="store_const", dest="kind", const="todo")
    which.add_argument("--requests", action="store_const", dest="kind", const="request")
    p.add_argument("--all", action="store_true", help="include done, abandoned and closed rows")
    p.add_argument("--json", action="store_true")


def _history_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser("history", parents=[common], help=GROUP_HELP["history"])
    p.add_argument("kind", choices=("todo", "request"))
    p.add_argument("id", type=int)
    p.add_argument("--json", action="store_true")


def _notify_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser("notify", parents=[common], help=GROUP_HELP["notify"])
    p.add_argument("text")
    p.add_argument("--kind", default="note", help="a short tag (default: note)")


def _outbox_parser(groups: Any, common: Parser) -> None:
    box = groups.add_parser("outbox", help=GROUP_HELP["outbox"])
    box_verbs = box.add_subparsers(dest="verb", required=True, parser_class=Parser)
    p = box_verbs.add_parser("list", parents=[common], help="recent rows, newest first")
    p.add_argument("--state", default=None, choices=OUTBOX_STATES)
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p = box_verbs.add_parser("retry", parents=[common], help="make a deferred row due now")
    p.add_argument("id", type=int)
    p = box_verbs.add_parser("cancel", parents=[common], help="give up on a row, with a reason")
    p.add_argument("id", type=int)
    p.add_argument("--reason", default=None, help="why (required)")


def _worker_parser(groups: Any, common: Parser) -> None:
    worker = groups.add_parser("worker", help=GROUP_HELP["worker"])
    verbs = worker.add_subparsers(dest="verb", required=True, parser_class=Parser)
    p = verbs.add_parser(
        "unlock",
        parents=[common],
        help="clear the worker lock, whoever holds it (the owner only)",
        description="Clear the notifier's worker lock, whoever holds it: for a holder on"
        " another host, or one known to be wedged, which no worker may take over. Only the"
        " owner ($COOP_OWNER) may; the event log records who, why and the holder cleared. A"
        " live holder stops at its next write and the next worker drains.",
    )
    p.add_argument("--reason", default=None, help="why (required; recorded in the event)")


def _status_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser(
        "status",
        parents=[common],
        help=GROUP_HELP["status"],
        description="What needs a person, at a glance. --check exits 1 when something does.",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 0 when healthy, 1 when something needs a person (for monitoring)",
    )
    p.add_argument(
        "--max-pending-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --check: a pending row older than this needs a person"
        " (default: $COOP_STATUS_MAX_PENDING_AGE_S or 600)",
    )


def _serve_parser(groups: Any, common: Parser) -> None:
    groups.add_parser("serve", parents=[common], help=GROUP_HELP["serve"])


def _cutover_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser("cutover", parents=[common], help=GROUP_HELP["cutover"])
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--url", help="the owner service's loopback URL, e.g. http://127.0.0.1:8764")
    how.add_argument("--undo", action="store_true", help="return to local mode")


def _reconcile_parser(groups: Any, common: Parser) -> None:
    p = groups.add_parser("reconcile", parents=[common], help=GROUP_HELP["reconcile"])
    p.add_argument("key")


GROUPS: dict[str, Callable[[Any, Parser], None]] = {
    "todo": _todo_parser,
    "request": _request_parser,
    "list": _list_parser,
    "history": _history_parser,
    "notify": _notify_parser,
    "outbox": _outbox_parser,
    "worker": _worker_parser,
    "status": _status_parser,
    "serve": _serve_parser,
    "cutover": _cutover_parser,
    "reconcile": _reconcile_parser,
}


def _actor(args: argparse.Namespace) -> str:
    actor = getattr(args, "actor", None)
    return lifecycle.require_actor(actor if actor is not None else os.environ.get("COOP_ACTOR"))


def _describe(kind: str, result: dict[str, Any], what: str) -> str:
    row = result[kind]
    line = f"{kind} #{row['id']} {what}"
    if result.get("changed") is False:
        line = f"{kind} #{row['id']} unchanged (the first close is the record)"
    if result.get("outbox_id"):
        line += f"; notification #{result['outbox_id']} queued"
    return line


def format_item(item: dict[str, Any]) -> str:
    """One listing line: `todo #12  [taken by X, 5h ago]  title`."""
    if item["status"] == "taken":
        state = f"[taken by {item['taken_by']}, {lifecycle.ago(item['taken_at'])}]"
    else:
        state = f"[{item['status']}]"
    line = f"{item['kind']} #{item['id']}  {state}  {item['title']}"
    if item.get("addressed_to"):
        line += f"  (for {item['addressed_to']})"
    if item.get("stale"):
        line += "  ← stale take: ask its holder, or the owner releases it with a reason"
    return line


def _run(args: argparse.Namespace, emit: Callable[[str], None]) -> dict[str, Any] | None:
    """Run one verb (its result, when it has one worth returning, for tests)."""
    db = getattr(args, "db", None)
    g, v = args.group, getattr(args, "verb", None)
    if g == "todo":
        actor = _actor(args)
        if v == "add":
            result = api.add_todo(args.title, actor=actor, body=args.body, db=db)
            emit(_describe("todo", result, "added"))
            return None
        if v == "take":
            result = api.take_todo(args.id, actor=actor, force=args.force, db=db)
            what = f"taken by {actor}"
        elif v == "release":
            result = api.release_todo(args.id, actor=actor, reason=args.reason, db=db)
            what = "released"
        elif v == "done":
            result = api.done_todo(
                args.id,
                actor=actor,
                result_summary=args.summary,
                commit_sha=args.commit,
                force=args.force,
                db=db,
            )
            what = "done"
        else:
            result = api.abandon_todo(
                args.id, actor=actor, reason=args.reason, force=args.force, db=db
            )
            what = "abandoned"
        emit(_describe("todo", result, what))
        return result
    if g == "request":
        actor = _actor(args)
        if v == "add":
            result = api.add_request(
                args.title, actor=actor, addressed_to=args.addressed_to, body=args.body, db=db
            )
            emit(_describe("request", result, "added"))
            return None
        if v == "take":
            result = api.take_request(args.id, actor=actor, force=args.force, db=db)
            what = f"taken by {actor}"
        elif v == "release":
            result = api.release_request(args.id, actor=actor, reason=args.reason, db=db)
            what = "released"
        else:
            result = api.close_request(
                args.id,
                actor=actor,
                result_summary=args.summary,
                commit_sha=args.commit,
                force=args.force,
                db=db,
            )
            what = "closed"
        emit(_describe("request", result, what))
        return result
    if g == "list":
        items = api.list_items(args.kind, include_closed=args.all, db=db)
        if args.json:
            emit(json.dumps(items, indent=2))
        else:
            for item in items:
                emit(format_item(item))
            if not items:
                emit("nothing open" if not args.all else "nothing yet")
        return None
    if g == "history":
        events = api.history(args.kind, args.id, db=db)
        if args.json:
            emit(json.dumps(events, indent=2))
        else:
            for event in events:
                payload = f"  {event['payload']}" if event["payload"] else ""
                emit(f"{event['at']}  {event['event']:<9} {event['actor']}{payload}")
        return None
    if g == "notify":
        result = api.notify(args.text, actor=_actor(args), kind=args.kind, db=db)
        emit(f"notification #{result['outbox_id']} queued")
        return result
    if g == "outbox":
        if v == "list":
            rows = api.rows(args.state, limit=args.limit, db=db)
            if args.json:
                emit(json.dumps(rows, indent=2))
            for row in [] if args.json else rows:
                error = f"  last error: {row['last_error']}" if row["last_error"] else ""
                emit(
                    f"#{row['id']}  {row['state']:<9} attempts={row['attempts']}"
                    f"  {row['kind']}: {row['text'][:60]!r}{error}"
                )
            return None
        if v == "retry":
            result = api.retry(args.id, actor=_actor(args), db=db)
            emit(f"notification #{args.id} is due now")
            return result
        api.cancel(args.id, actor=_actor(args), reason=args.reason, db=db)
        emit(f"notification #{args.id} cancelled")
        return None
    if g == "worker":
        result = api.unlock_worker(actor=_actor(args), reason=args.reason, db=db)
        held = result["unlocked"]
        if held is None:
            emit("the worker lock is already free; nothing to unlock")
        else:
            emit(
                f"worker lock of {held['owner']} (pid {held['pid']} on {held['host']}, since"
                f" {lifecycle.clock(held['acquired_at'])}) cleared; the event log records why"
            )
        return result
    if g == "status":
        if _status(args, db, emit):
            raise _NeedsAPerson
        return None
    if g == "cutover":
        _cutover(args, db, emit)
        return None
    if g == "reconcile":
        _reconcile(args.key, db, emit)
        return None
    raise AssertionError(f"unhandled command {g} {v}")


class _NeedsAPerson(CoopError):
    """`coop status --check` found something that needs a person."""


def _operator(args: argparse.Namespace) -> str:
    actor = getattr(args, "actor", None) or os.environ.get("COOP_ACTOR") or "operator"
    return lifecycle.require_actor(actor)


def _status(args: argparse.Namespace, db: str | None, emit: Callable[[str], None]) -> int:
    from engine import status
    from engine.errors import OwnerUnavailable

    max_age_s = status.max_pending_age(args.max_pending_age)
    pending = status.uncertain_receipts()
    try:
        snapshot = status.status_snapshot(db=db)
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
        for line in status.render(report):
            emit(line)
        for line in found:
            emit(f"needs a person: {line}")
    return 1 if args.check and found else 0


def _cutover(args: argparse.Namespace, db: str | None, emit: Callable[[str], None]) -> None:
    from engine.owner import cutover

    if args.undo:
        for line in cutover.undo(actor=_operator(args), db=db):
            emit(line)
        return
    config = cutover.cutover(args.url, actor=_operator(args), db=db)
    emit(f"backed up {config['database']} to {config['backup']}")
    emit(f"wrote the owner credential {config['credential_file']} (0600)")
    emit(f"installed the fence ({config['fence_triggers']} triggers)")
    emit(f"wrote the owner file {config['owner_file']}: every call now goes to {config['url']}")


def _reconcile(key: str, db: str | None, emit: Callable[[str], None]) -> None:
    from engine import owner, store
    from engine.owner import compat, receipts

    config = owner.owner_config(store.resolve(db))
    if config is None:
        raise UsageError(
            "no owner file: reconcile asks the owner service, and this ledger is in local mode"
        )
    answer = compat.reconcile(key, config)
    settled = answer.get("receipt")
    what = {
        "committed": "committed: it ran once and its change is in the ledger",
        "rejected": "rejected: it changed nothing",
        "never_arrived": "never arrived: it changed nothing and will not run later; send it again",
    }.get(answer["outcome"], answer["outcome"])
    method = f" ({answer['method']})" if answer.get("method") not in (None, "?") else ""
    emit(f"request {key}{method} {what}")
    if answer.get("error"):
        emit(f"  refused with: {answer['error']['message']}")
    emit(f"  receipt settled {settled['state']}" if settled else "  no local receipt for it")
    receipts.prune()


def _fail(exc: CoopError) -> int:
    """One line with the error's exact words; its detail, if any, on a line of its own."""
    print(f"{PROG}: {exc}", file=sys.stderr)
    if exc.detail:
        print(f"{PROG}: {exc.detail}", file=sys.stderr)
    return exc.exit_status


def _exec_service() -> int:
    """`coop serve` becomes `python -m notifier serve` (`notifier.serve`): the engine service
    embeds the notifier's daemon, and the engine never imports the notifier. Exec, not a child:
    the same pid takes the stop signals honcho and systemd send, and exits with the service's
    status."""
    argv = [sys.executable, "-m", "notifier", "serve"]
    try:
        os.execv(sys.executable, argv)  # noqa: S606 - our own interpreter, a fixed argv
    except OSError as exc:
        print(
            f"{PROG} serve: cannot start the engine service: {exc.strerror or exc}", file=sys.stderr
        )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(words).parse_args(words)
    if args.group == "serve":
        if getattr(args, "db", None):
            os.environ["COOP_DB"] = args.db
        return _exec_service()
    try:
        # The public functions kick the notifier themselves after their commit (engine.api),
        # for the CLI and library callers alike.
        _run(args, print)
    except CoopError as exc:
        return _fail(exc)
    except OSError as exc:
        # A folder or file the command needs (the data folder, the receipts) is not usable.
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{PROG}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
