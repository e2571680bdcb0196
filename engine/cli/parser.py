"""The `coop` command tree: argparse, built lazily (only the group a command names gets its
arguments), with one-line usage errors. What each command does is `engine.cli.commands`."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

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
