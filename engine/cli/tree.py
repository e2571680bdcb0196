"""The `coop` command tree as data, and the quick parse of a plain command line.

Every verb's command is derived here from the verb itself (`engine.verbs`): its words, help
line and the spelling of each parameter from the `@command` beside the function, each
argument's type and default from the function's signature (read from the function object, no
`inspect`), in the order the declaration spells them. The operator's commands that run no verb
(`status`, `serve`, `cutover`, `reconcile`, `backup`, `restore`) are written below.
`engine.cli.parser` builds argparse from the tree for `--help` and for every usage error;
`quick_parse` reads the same tree to parse a plain, well-formed command line without argparse
at all. argparse costs a cold `coop todo done` about a fifth of its time (the module, its
gettext and locale lookups, a parser per level), which a verb that parses three words should
not pay. A line that names no command, or a word where one goes that is none, is answered by
`misnamed` in a person's words (the closest names, by `difflib`), not argparse's.

`quick_parse` answers exactly what argparse would, or nothing: it takes only exact option names
(`--summary X`, `--summary=X`), positionals that do not start with `-`, values that convert and
fit their choices, each exclusive group used at most once, and every positional given; anything
else (`--help`, an abbreviation, `--`, a missing or extra argument, a bad value) returns None
and argparse parses the line, printing its help or its one-line error. The equivalence is
pinned by tests/unit/cli/test_cli_parse.py against argparse itself.

`refusal` then holds the answer, whichever parse gave it, to what every command can take: text
that is UTF-8 without a NUL, integers within SQLite's 64 bits, finite numbers. It reads the
answer, not the table, so a new argument is held to it too (tests/fuzz/test_argv_fuzz.py).

Standard library only, and no argparse.
"""

from __future__ import annotations

from types import SimpleNamespace

from engine.verbs import VERBS
from engine.verbs.declare import OneOf, cli_of
from plumbing.ids import row_id

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from engine.verbs.declare import Cli, Spelling

    #: One argument: its names and `add_argument`'s keyword arguments.
    Arg = tuple[tuple[str, ...], dict[str, Any]]


PROG = "coop"

#: SQLite's integers: every id and count a command hands the ledger fits in 64 bits.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_INFINITY = float("inf")


class Exclusive:
    """A mutually exclusive group of arguments (`add_mutually_exclusive_group`)."""

    __slots__ = ("args", "required")

    def __init__(self, *args: Arg, required: bool = False) -> None:
        self.args = args
        self.required = required


class Command:
    """One command's parser: its help line, its description and its arguments in order, and the
    verb it runs (None for the operator's commands, which `engine.cli.commands` runs)."""

    __slots__ = ("args", "description", "help", "verb")

    def __init__(
        self,
        help: str,
        *args: Arg | Exclusive,
        description: str | None = None,
        verb: Callable[..., Any] | None = None,
    ) -> None:
        self.help = help
        self.description = description
        self.args = args
        self.verb = verb

    def arguments(self) -> list[Arg]:
        """Every argument, groups opened."""
        return [
            arg
            for item in self.args
            for arg in (item.args if isinstance(item, Exclusive) else (item,))
        ]


def arg(*names: str, **settings: Any) -> Arg:
    return names, settings


JSON = arg("--json", action="store_true")

#: The options every command takes, at the top level or after its verb: (names, dest). Their
#: default is argparse's SUPPRESS, so the answer has no attribute for one not given.
COMMON: dict[str, str] = {"--as": "actor", "--db": "db"}

#: What an annotation (a string: the verbs use `from __future__ import annotations`) converts a
#: command-line word with.
_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float}


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    """A function's parameter defaults by name, read from the function (no `inspect`)."""
    code = fn.__code__
    positional = code.co_varnames[: code.co_argcount]
    given = fn.__defaults__ or ()
    found = dict(zip(positional[len(positional) - len(given) :], given, strict=True))
    found.update(fn.__kwdefaults__ or {})
    return found


def _spelled(fn: Callable[..., Any], name: str, spelling: Spelling) -> Arg:
    """One parameter as `add_argument` takes it: its type and default from the signature, its
    spelling and help from the declaration beside the verb."""
    annotation = fn.__annotations__[name]
    convert = _TYPES.get(annotation.removesuffix(" | None"))
    if convert is int and name.endswith("_id"):
        convert = row_id  # `7` or `#7`, as every line prints an id
    settings: dict[str, Any] = {}
    if spelling.positional:
        if convert is not None:
            settings["type"] = convert
        if spelling.name != name:
            settings["metavar"] = spelling.name
        return (name,), {**settings, **spelling.settings}
    flag = spelling.name.lstrip("-").replace("-", "_")
    if flag != name:
        settings.update(dest=name, metavar=flag.upper())
    if annotation == "bool":
        settings = {"action": "store_true", **({"dest": name} if flag != name else {})}
    else:
        settings["default"] = _defaults(fn).get(name)
        if convert is not None:
            settings["type"] = convert
    return (spelling.name,), {**settings, **spelling.settings}


def _command(fn: Callable[..., Any], cli: Cli) -> Command:
    """A verb's command, derived from its signature and its `@command`. A spelling of no
    parameter, or a parameter the command line could not give, fails here, at import."""
    code = fn.__code__
    names = code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]
    unknown = set(cli.spellings) - set(names)
    unspelled = set(names) - set(cli.spellings) - set(_defaults(fn)) - set(COMMON.values())
    if unknown or unspelled:
        raise TypeError(
            f"@command of {fn.__name__}: spells no parameter {sorted(unknown)},"
            f" leaves required {sorted(unspelled)} unspelled"
        )
    args: list[Arg | Exclusive] = []
    for name, spelling in cli.spellings.items():
        if isinstance(spelling, OneOf):
            flags = (
                arg(flag, action="store_const", dest=name, const=v) for flag, v in spelling.flags
            )
            args.append(Exclusive(*flags))
        else:
            args.append(_spelled(fn, name, spelling))
    if cli.json:
        args.append(JSON)
    return Command(cli.help, *args, description=cli.description, verb=fn)


#: The help line of each group of several commands (a group that is one command has its own).
_GROUPS: dict[str, str] = {
    "todo": "add, take, release, finish or abandon a todo",
    "request": "add, take, release, close or wait for a request",
    "outbox": "inspect, retry or cancel notification rows",
    "worker": "the notifier's worker lock: the owner clears a stuck holder",
}

#: Every command, keyed by group and verb (None for a group that is one command), in the order
#: `--help` lists them: every verb's (`engine.verbs`, each declared beside its function), then
#: the operator's.
COMMANDS: dict[tuple[str, str | None], Command] = {}
for _fn in VERBS.values():
    _cli = cli_of(_fn)
    if _cli is not None:
        COMMANDS[_cli.words] = _command(_fn, _cli)
COMMANDS.update(
    {
        ("status", None): Command(
            "ledger, outbox, worker lock, receipts and the door, for an operator",
            JSON,
            arg(
                "--check",
                action="store_true",
                help="exit 0 when healthy, 1 when something needs a person (for monitoring)",
            ),
            arg(
                "--max-pending-age",
                # Text, converted by `status.max_pending_age`: a refusal echoes it as typed.
                default=None,
                metavar="SECONDS",
                help="with --check: a pending row older than this needs a person"
                " (default: $COOP_STATUS_MAX_PENDING_AGE_S or 600)",
            ),
            description="What needs a person, at a glance. --check exits 1 when something does.",
        ),
        ("serve", None): Command("run the engine service (owner+notifier)"),
        ("cutover", None): Command(
            "make the owner service the only writer, or undo it",
            Exclusive(
                arg(
                    "--socket",
                    metavar="PATH",
                    help="the owner service's Unix socket (default: $COOP_SERVICE_SOCKET or"
                    " <COOP_HOME>/service.sock)",
                ),
                arg("--undo", action="store_true", help="return to local mode"),
            ),
        ),
        ("reconcile", None): Command("ask the owner what became of a request key", arg("key")),
        ("backup", None): Command(
            "copy coop.db and chief.db, online and checked, into a new folder inside DIR",
            arg("dir", metavar="DIR", help="where backups go (created 0700)"),
            description="Copy coop.db and chief.db through SQLite's backup API while the"
            " services run, into DIR/coop-backup-<UTC time>, check each copy and print its rows.",
        ),
        ("restore", None): Command(
            "put a backup's coop.db back (the services stopped)",
            arg("dir", metavar="DIR", help="the backup folder `coop backup` printed"),
            arg(
                "--with-chief",
                action="store_true",
                help="restore chief.db too: the door forgets what it took since, so rows"
                " delivered since ring again",
            ),
            description="Restore coop.db from a backup while no service holds it, and say what"
            " is sent again and what is gone. chief.db stays as it is unless --with-chief.",
        ),
    }
)
#: Every group's help line, in the order `--help` lists the groups.
GROUP_HELP: dict[str, str] = {
    group: _GROUPS[group] if verb is not None else command.help
    for (group, verb), command in COMMANDS.items()
}

#: The verbs of each group that has them (the others are one command each).
GROUP_VERBS: dict[str, list[str]] = {}
for _group, _verb in COMMANDS:
    if _verb is not None:
        GROUP_VERBS.setdefault(_group, []).append(_verb)


def _after_top(argv: Sequence[str] | None) -> list[str]:
    """The words after the top-level options (`--as X`, `--db=Y`)."""
    words = list(argv or ())
    while words and (words[0] in COMMON or words[0].startswith(("--as=", "--db="))):
        if "=" not in words[0] and len(words) < 2:
            break  # an option without its value: argparse says so
        del words[: 1 if "=" in words[0] else 2]
    return words


def named(argv: Sequence[str] | None) -> tuple[str | None, str | None]:
    """The group and the verb `argv` names for certain, else None for either: the group is the
    first word after the top-level options (`--as X`, `--db=Y`), the verb the word after it."""
    words = _after_top(argv)
    group = words[0] if words and words[0] in GROUP_HELP else None
    if group is None:
        return None, None
    verbs = GROUP_VERBS.get(group)
    verb = words[1] if verbs is not None and len(words) > 1 and words[1] in verbs else None
    return group, verb


def misnamed(argv: Sequence[str] | None) -> str | None:
    """The one-line usage error for a line that names no command, or a group and no verb, or a
    word where either goes that is none: the closest names suggested (`difflib`), in the words
    a person typed, not argparse's (`argument group: invalid choice`). None for any other line,
    which argparse parses (an option in that place, `--help`, a usage error further on)."""
    words = _after_top(argv)
    if not words:
        return f"{PROG}: name a command: {', '.join(GROUP_HELP)} (see {PROG} --help)"
    if words[0].startswith("-"):
        return None
    if words[0] not in GROUP_HELP:
        return unknown_word(PROG, "command", words[0], list(GROUP_HELP))
    verbs = GROUP_VERBS.get(words[0])
    prog = f"{PROG} {words[0]}"
    if verbs is None or (len(words) > 1 and words[1].startswith("-")):
        return None
    if len(words) == 1:
        return f"{prog}: name a verb: {', '.join(verbs)} (see {prog} --help)"
    if words[1] not in verbs:
        return unknown_word(prog, "verb", words[1], verbs)
    return None


def unknown_word(prog: str, what: str, typed: str, known: list[str]) -> str:
    """`prog: no command 'todoo'; did you mean todo? (see prog --help)`: the closest of `known`
    by `difflib`, else all of them. The word is echoed as typed (a repr only escapes what a
    terminal line cannot show)."""
    import difflib

    close = difflib.get_close_matches(typed, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}?" if close else f"the {what}s are {', '.join(known)}"
    return f"{prog}: no {what} {typed!r}; {hint} (see {prog} --help)"


def dest(names: tuple[str, ...], settings: dict[str, Any]) -> str:
    """The attribute an argument sets, as argparse names it."""
    return str(settings.get("dest") or names[0].lstrip("-").replace("-", "_"))


def _label(group: str, verb: str | None, name: str) -> str:
    """How `--help` names the argument behind the attribute `name`: its option, or the
    positional in capitals (`TEXT`, `ID`)."""
    for option, common in COMMON.items():
        if common == name:
            return option
    for names, settings in COMMANDS[(group, verb)].arguments():
        if dest(names, settings) == name:
            if names[0].startswith("-"):
                return names[0]
            return str(settings.get("metavar") or names[0]).upper()
    return name


def _problem(value: object) -> str | None:
    """What no command can take in a parsed value, or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return "contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # Python hands argv bytes that are not UTF-8 over as lone surrogates; no database,
            # JSON body or terminal line can carry them.
            return "is not valid UTF-8 (the shell passed bytes that are not UTF-8 text)"
    elif isinstance(value, bool):
        return None
    elif isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return f"is out of range: a whole number from {INT64_MIN} to {INT64_MAX}"
    elif isinstance(value, float) and (value != value or value in (_INFINITY, -_INFINITY)):
        return "must be a finite number"
    return None


def refusal(args: Any) -> str | None:
    """The first parsed argument no command can take (text that is not UTF-8 or holds a NUL, an
    integer past SQLite's 64 bits, a float that is nan or infinite), as one line naming it;
    None when every argument can be taken. Checked on the parse's answer, argparse's or
    `quick_parse`'s, so every argument of every command is held to it, a new one too."""
    for name, value in vars(args).items():
        problem = _problem(value)
        if problem is not None:
            return f"argument {_label(args.group, getattr(args, 'verb', None), name)} {problem}"
    return None


class _Unsure(Exception):
    """The line is not one `quick_parse` answers for certain: argparse parses it."""


def _option_value(words: list[str], at: int, word: str) -> tuple[str, str, int]:
    """An option word, its value and the index after them: `--x=V` or `--x V`."""
    if "=" in word:
        name, value = word.split("=", 1)
        if not value or value == "--":  # argparse reads `--x=--` as an empty list
            raise _Unsure
        return name, value, at + 1
    if at + 1 >= len(words) or words[at + 1].startswith("-"):
        raise _Unsure
    return word, words[at + 1], at + 2


def _converted(settings: dict[str, Any], value: str) -> Any:
    convert = settings.get("type")
    try:
        result = convert(value) if convert is not None else value
    except (TypeError, ValueError):
        raise _Unsure from None
    if "choices" in settings and result not in settings["choices"]:
        raise _Unsure
    return result


def _top(words: list[str], answer: dict[str, Any]) -> list[str]:
    """Read the top-level `--as`/`--db` into `answer`; return the words after them."""
    at = 0
    while at < len(words) and words[at].startswith("-"):
        name, value, at = _option_value(words, at, words[at])
        if name not in COMMON:
            raise _Unsure
        answer[COMMON[name]] = value
    return words[at:]


def _command_line(command: Command, words: list[str], answer: dict[str, Any]) -> None:
    """Parse one command's words into `answer`, argparse's way, or raise `_Unsure`."""
    options: dict[str, tuple[tuple[str, ...], dict[str, Any], int | None]] = {}
    positionals: list[Arg] = []
    for number, item in enumerate(command.args):
        for names, settings in item.args if isinstance(item, Exclusive) else (item,):
            group = number if isinstance(item, Exclusive) else None
            if names[0].startswith("-"):
                options[names[0]] = (names, settings, group)
                if settings.get("action") == "store_true":
                    answer.setdefault(dest(names, settings), False)
                else:
                    answer.setdefault(dest(names, settings), settings.get("default"))
            else:
                positionals.append((names, settings))
    used: dict[int, int] = {}
    given: list[str] = []
    at = 0
    while at < len(words):
        word = words[at]
        if not word.startswith("-"):
            given.append(word)
            at += 1
            continue
        name = word.split("=", 1)[0]
        if name in COMMON:
            name, value, at = _option_value(words, at, word)
            answer[COMMON[name]] = value
            continue
        if name not in options:
            raise _Unsure  # --help, an abbreviation, `--`, a negative number, a typo
        names, settings, group = options[name]
        if group is not None:
            used[group] = used.get(group, 0) + 1
        action = settings.get("action")
        if action in ("store_true", "store_const"):
            if "=" in word:
                raise _Unsure
            answer[dest(names, settings)] = True if action == "store_true" else settings["const"]
            at += 1
            continue
        name, value, at = _option_value(words, at, word)
        answer[dest(names, settings)] = _converted(settings, value)
    if len(given) != len(positionals) or any(count > 1 for count in used.values()):
        raise _Unsure
    for number, item in enumerate(command.args):
        if isinstance(item, Exclusive) and item.required and number not in used:
            raise _Unsure
    for (names, settings), value in zip(positionals, given, strict=True):
        answer[dest(names, settings)] = _converted(settings, value)


def quick_parse(argv: Sequence[str]) -> SimpleNamespace | None:
    """What `build_parser(argv).parse_args(argv)` answers for a plain, well-formed command
    line, without argparse; None for any other line (argparse then parses it)."""
    group, verb = named(argv)
    if group is None or (group in GROUP_VERBS and verb is None):
        return None
    answer: dict[str, Any] = {"version": None}
    try:
        words = _top(list(argv), answer)
        # `named` found the group (and verb) right after the top-level options.
        words = words[2:] if verb is not None else words[1:]
        answer["group"] = group
        if verb is not None:
            answer["verb"] = verb
        _command_line(COMMANDS[(group, verb)], words, answer)
    except _Unsure:
        return None
    return SimpleNamespace(**answer)
