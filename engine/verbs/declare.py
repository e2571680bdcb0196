"""What the `coop` CLI needs of a verb beyond its signature, written beside the function.

A verb's function (its typed signature and docstring) is the one source of the verb: the
public Python API (`engine.api`), the owner service's argument check (`engine.owner.arguments`)
and the CLI's command tree (`engine.cli.tree`) are derived from it. What the signature cannot
say, the verb's `@command` says next to it: the words that name it, its help line, and how
each parameter is spelled on a command line (a positional's name, an option's flag). The types,
defaults and the order of the parameters come from the signature; `actor` is always the
common `--as` (default `$COOP_ACTOR`) and `db` the common `--db`.

    @command("todo take", "take a todo to work on it", says="taken by {actor}",
             todo_id=pos("id"), force=opt("--force", help="take it over from its holder"))
    def take_todo(unit: Unit, todo_id: int, *, actor: str, force: bool = False,
                  db: str | None = None) -> Row: ...

`says` is what the command prints of the answer: a suffix to the row's line
(`todo #3 taken by builder`) when the answer names a row, else a line formatted with the
answer and the arguments. A read declares `json=True` for `--json`. `@reads` marks a verb that
changes nothing; `@waits` one that is a single look of a wait (`coop request wait`), which the
public function repeats until the look shows what it waits for (`engine.api`).

Standard library only, read at the CLI's cold start: no `inspect`, no `typing`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])
    #: What a command prints of an answer: a template, or a function of the answer and the
    #: arguments by parameter name.
    Says = str | Callable[[Any, dict[str, Any]], str]


class Spelling:
    """How one parameter is written on a command line: a positional (`ID`) or an option."""

    __slots__ = ("name", "settings")

    def __init__(self, name: str, settings: dict[str, Any]) -> None:
        self.name = name
        self.settings = settings

    @property
    def positional(self) -> bool:
        return not self.name.startswith("-")


class OneOf:
    """Flags that are mutually exclusive, each setting the parameter to its value
    (`--todos` → kind="todo", `--requests` → kind="request")."""

    __slots__ = ("flags",)

    def __init__(self, *flags: tuple[str, object]) -> None:
        self.flags = flags


def one_of(*flags: tuple[str, object]) -> OneOf:
    """Mutually exclusive flags, each a value of the parameter (`one_of(("--todos", "todo"))`)."""
    return OneOf(*flags)


def pos(name: str, **settings: Any) -> Spelling:
    """A positional, as `--help` names it (`pos("id")` for `todo_id`)."""
    return Spelling(name, settings)


def opt(flag: str, **settings: Any) -> Spelling:
    """An option, by its flag (`opt("--summary", help=...)` for `result_summary`)."""
    return Spelling(flag, settings)


class Cli:
    """A verb's command: its words, help line, spellings by parameter, and what it prints."""

    __slots__ = ("description", "help", "json", "says", "spellings", "words")

    def __init__(
        self,
        words: tuple[str, str | None],
        help: str,
        spellings: dict[str, Spelling | OneOf],
        says: Says | None,
        json: bool,
        description: str | None,
    ) -> None:
        self.words = words
        self.help = help
        self.spellings = spellings
        self.says = says
        self.json = json
        self.description = description


def command(
    words: str,
    help: str,
    *,
    says: Says | None = None,
    json: bool = False,
    description: str | None = None,
    **spellings: Spelling | OneOf,
) -> Callable[[F], F]:
    """Declare the `coop` command that runs the verb below: `words` name it (`"todo take"`,
    `"list"`), each keyword spells the parameter of that name, in the order `--help` lists."""
    group, _, verb = words.partition(" ")
    cli = Cli((group, verb or None), help, spellings, says, json, description)

    def declare(fn: F) -> F:
        fn.__dict__["cli"] = cli
        return fn

    return declare


def reads(fn: F) -> F:
    """Declare the verb below a read: it changes nothing, runs outside a write transaction, and
    the owner's command log keeps no answer for it."""
    fn.__dict__["reads"] = True
    return fn


def waits(fn: F) -> F:
    """Declare the verb below one look of a wait: its public function (`engine.api`) binds a
    waiter's socket, then repeats the look, woken by each commit that settles what it waits
    for, until the look's answer shows it settled or the timeout passes. The look itself is a
    read (`@reads`) and never blocks, here or at the owner service."""
    fn.__dict__["waits"] = True
    return fn


def cli_of(fn: Callable[..., Any]) -> Cli | None:
    """The command a verb declares, or None for a verb with no command of its own."""
    found = fn.__dict__.get("cli")
    return found if isinstance(found, Cli) else None
