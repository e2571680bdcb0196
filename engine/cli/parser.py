"""The `coop` command tree: argparse, built for the command named only, with one-line usage
errors. What each command does is `engine.cli.commands`.

A verb's cold start pays for the parsers it builds (each one costs argparse's translation
lookups and a formatter), so `build_parser(argv)` builds the top level, the group and the verb
`argv` names and nothing else: `coop todo done 1` builds three parsers, not forty. Whatever
the words leave open (no group yet, an option before it that is not `--as`/`--db`, no verb yet,
`--help` before the verb) gets the whole group, or the whole tree, so `--help` and every usage
error read exactly as they always did.
"""

from __future__ import annotations

import argparse
import os

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    #: Adds one group's parser (and, of a group with verbs, the verb named, or all of them).
    GroupBuilder = Callable[[Any, "Parser", "str | None"], None]

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


#: The top-level options that take a value, as `--as X` or `--as=X` before the group.
TOP_OPTIONS = ("--as", "--db")


def named(argv: Sequence[str] | None) -> tuple[str | None, str | None]:
    """The group and the verb `argv` names for certain, else None for either: the group is the
    first word after the top-level options (`--as X`, `--db=Y`), the verb the word after it."""
    words = list(argv or ())
    while words and (words[0] in TOP_OPTIONS or words[0].startswith(("--as=", "--db="))):
        del words[: 1 if "=" in words[0] else 2]
    group = words[0] if words and words[0] in GROUPS else None
    if group is None:
        return None, None
    verbs = GROUP_VERBS.get(group)
    verb = words[1] if verbs is not None and len(words) > 1 and words[1] in verbs else None
    return group, verb


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The command tree for `argv`: of the group and verb it names (`named`), only those;
    without `argv`, or where the words leave either open, all of it."""
    group, verb = named(argv)
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
        if group is None or name == group:
            add(groups, common, verb)
    return parser


def _verbs(groups: Any, name: str) -> Any:
    """A group with verbs: its parser, and the action its verbs are added to."""
    parser = groups.add_parser(name, help=GROUP_HELP[name])
    return parser.add_subparsers(dest="verb", required=True, parser_class=Parser)


def _todo_parser(groups: Any, common: Parser, verb: str | None) -> None:
    verbs = _verbs(groups, "todo")
    if verb in (None, "add"):
        p = verbs.add_parser("add", parents=[common], help="add an open todo")
        p.add_argument("title")
        p.add_argument("--body", default=None)
    if verb in (None, "take"):
        p = verbs.add_parser("take", parents=[common], help="take a todo to work on it")
        p.add_argument("id", type=int)
        p.add_argument("--force", action="store_true", help="take it over from its holder")
    if verb in (None, "release"):
        p = verbs.add_parser("release", parents=[common], help="give a taken todo back")
        p.add_argument("id", type=int)
        p.add_argument("--reason", default=None, help="why (required)")
    if verb in (None, "done"):
        p = verbs.add_parser("done", parents=[common], help="finish a todo (or amend it)")
        p.add_argument("id", type=int)
        p.add_argument("--summary", default=None, help="what came of it")
        p.add_argument("--commit", default=None, help="the commit that did it")
        p.add_argument("--force", action="store_true", help="finish a todo someone else holds")
    if verb in (None, "abandon"):
        p = verbs.add_parser("abandon", parents=[common], help="give a todo up for good")
        p.add_argument("id", type=int)
        p.add_argument("--reason", default=None, help="why (required)")
        p.add_argument("--force", action="store_true", help="abandon a todo someone else holds")


def _request_parser(groups: Any, common: Parser, verb: str | None) -> None:
    verbs = _verbs(groups, "request")
    if verb in (None, "add"):
        p = verbs.add_parser("add", parents=[common], help="add an open request")
        p.add_argument("title")
        p.add_argument("--to", dest="addressed_to", default=None, help="the actor it is for")
        p.add_argument("--body", default=None)
    if verb in (None, "take"):
        p = verbs.add_parser("take", parents=[common], help="take a request")
        p.add_argument("id", type=int)
        p.add_argument("--force", action="store_true", help="take it over from its holder")
    if verb in (None, "release"):
        p = verbs.add_parser("release", parents=[common], help="give a taken request back")
        p.add_argument("id", type=int)
        p.add_argument("--reason", default=None)
    if verb in (None, "close"):
        p = verbs.add_parser("close", parents=[common], help="close a request (or amend it)")
        p.add_argument("id", type=int)
        p.add_argument("--summary", default=None)
        p.add_argument("--commit", default=None)
        p.add_argument("--force", action="store_true", help="close a request someone else holds")


def _list_parser(groups: Any, common: Parser, verb: str | None) -> None:
    p = groups.add_parser("list", parents=[common], help=GROUP_HELP["list"])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--todos", action="store_const", dest="kind", const="todo")
    which.add_argument("--requests", action="store_const", dest="kind", const="request")
    p.add_argument("--all", action="store_true", help="include done, abandoned and closed rows")
    p.add_argument("--json", action="store_true")


def _history_parser(groups: Any, common: Parser, verb: str | None) -> None:
    p = groups.add_parser("history", parents=[common], help=GROUP_HELP["history"])
    p.add_argument("kind", choices=("todo", "request"))
    p.add_argument("id", type=int)
    p.add_argument("--json", action="store_true")


def _notify_parser(groups: Any, common: Parser, verb: str | None) -> None:
    p = groups.add_parser("notify", parents=[common], help=GROUP_HELP["notify"])
    p.add_argument("text")
    p.add_argument("--kind", default="note", help="a short tag (default: note)")


def _outbox_parser(groups: Any, common: Parser, verb: str | None) -> None:
    verbs = _verbs(groups, "outbox")
    if verb in (None, "list"):
        from engine.store.queue import STATES

        p = verbs.add_parser("list", parents=[common], help="recent rows, newest first")
        p.add_argument("--state", default=None, choices=STATES)
        p.add_argument("--limit", type=int, default=50)
        p.add_argument("--json", action="store_true")
    if verb in (None, "retry"):
        p = verbs.add_parser("retry", parents=[common], help="make a deferred row due now")
        p.add_argument("id", type=int)
    if verb in (None, "cancel"):
        p = verbs.add_parser("cancel", parents=[common], help="give up on a row, with a reason")
        p.add_argument("id", type=int)
        p.add_argument("--reason", default=None, help="why (required)")


def _worker_parser(groups: Any, common: Parser, verb: str | None) -> None:
    verbs = _verbs(groups, "worker")
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


def _status_parser(groups: Any, common: Parser, verb: str | None) -> None:
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


def _serve_parser(groups: Any, common: Parser, verb: str | None) -> None:
    groups.add_parser("serve", parents=[common], help=GROUP_HELP["serve"])


def _cutover_parser(groups: Any, common: Parser, verb: str | None) -> None:
    p = groups.add_parser("cutover", parents=[common], help=GROUP_HELP["cutover"])
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--url", help="the owner service's loopback URL, e.g. http://127.0.0.1:8764")
    how.add_argument("--undo", action="store_true", help="return to local mode")


def _reconcile_parser(groups: Any, common: Parser, verb: str | None) -> None:
    p = groups.add_parser("reconcile", parents=[common], help=GROUP_HELP["reconcile"])
    p.add_argument("key")


GROUPS: dict[str, GroupBuilder] = {
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

#: The verbs of each group that has them (the others are one command each).
GROUP_VERBS: dict[str, frozenset[str]] = {
    "todo": frozenset({"add", "take", "release", "done", "abandon"}),
    "request": frozenset({"add", "take", "release", "close"}),
    "outbox": frozenset({"list", "retry", "cancel"}),
    "worker": frozenset({"unlock"}),
}
