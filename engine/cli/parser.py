"""The `coop` command tree in argparse, for `--help` and every usage error (one line each).

The tree itself (every command's arguments and help) is `engine.cli.tree`, which also parses a
plain command line without argparse; a line it is unsure of comes here. What each command does
is `engine.cli.commands`.

Each parser argparse builds costs a cold start its translation lookups and a formatter, so
`build_parser(argv)` builds the top level, the group and the verb `argv` names and nothing
else. Whatever the words leave open (no group yet, an option before it that is not
`--as`/`--db`, no verb yet) gets the whole group, or the whole tree, so `--help` and every
usage error read exactly as with the whole tree.
"""

from __future__ import annotations

import argparse
import os

from engine.cli.tree import COMMANDS, GROUP_HELP, GROUP_VERBS, PROG, Exclusive, named
from plumbing.terminal import shown

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, NoReturn

    from engine.cli.tree import Command


class _Formatter(argparse.HelpFormatter):
    """Help text as wide as `$COLUMNS` (default 100) without importing shutil to ask the tty:
    argparse builds a formatter for every argument it adds, and shutil costs a cold start ~4 ms."""

    def __init__(self, prog: str) -> None:
        columns = os.environ.get("COLUMNS", "")
        super().__init__(prog, width=(int(columns) if columns.isdigit() else 100) - 2)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming where to look: the `--help` of the
    command the line names (`helps`), since argparse reports an unrecognized option at the top
    level whatever command it followed."""

    helps: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # argparse quotes an unrecognised argument as it came: escaped, as every line is.
        message += _id_hint(message)
        self.exit(2, shown(f"{self.prog}: {message} (see {self.helps or self.prog} --help)") + "\n")


#: argparse's words for missing positionals, before their names.
_REQUIRED = "the following arguments are required:"


def _id_hint(message: str) -> str:
    """How to give a missing id: `coop request show #7` in a shell runs `coop request show`,
    the shell taking `#7` for a comment."""
    if not message.startswith(_REQUIRED):
        return ""
    names = [name.strip() for name in message.removeprefix(_REQUIRED).split(",")]
    if "id" not in names:
        return ""
    return "; give an id as 7 or '#7' (quoted: a shell drops an unquoted # and what follows)"


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


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """The command tree for `argv`: of the group and verb it names (`tree.named`), only those;
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
    parser.helps = " ".join(word for word in (PROG, group, verb) if word is not None)
    groups = parser.add_subparsers(dest="group", required=True, parser_class=Parser)
    for name in GROUP_HELP:
        if group is not None and name != group:
            continue
        if name not in GROUP_VERBS:
            _add(groups, name, COMMANDS[(name, None)], common)
            continue
        parent = groups.add_parser(name, help=GROUP_HELP[name])
        verbs = parent.add_subparsers(dest="verb", required=True, parser_class=Parser)
        for each in GROUP_VERBS[name]:
            if verb is None or each == verb:
                _add(verbs, each, COMMANDS[(name, each)], common)
    return parser


def _add(subparsers: Any, name: str, command: Command, common: Parser) -> None:
    """One command's parser, from its entry in the tree."""
    extra = {"description": command.description} if command.description else {}
    parser = subparsers.add_parser(name, parents=[common], help=command.help, **extra)
    for item in command.args:
        if isinstance(item, Exclusive):
            group = parser.add_mutually_exclusive_group(required=item.required)
            for names, settings in item.args:
                group.add_argument(*names, **settings)
        else:
            names, settings = item
            parser.add_argument(*names, **settings)
