"""Every verb is reachable from the `coop` CLI, from the Python API and through the owner
service, with the same parameters: all derived from the one declaration (the verb's function in
`engine.verbs`, its signature and the `@command` beside it), never from a list kept here.

For each verb, in `engine.verbs.VERBS` order, one sample call is made from its signature (a
value for every parameter, the CLI's own spelling where it restricts one). The CLI's parse of
the command line the declaration spells must give exactly that call; the public function
(`engine.ledger`/`engine.outbox`, by the verb's name) has the verb's signature less the unit;
and the call runs twice on two ledgers seeded alike: through the public function here, and as
a `coop` command line routed to a real owner service after a real cutover. Both must end alike
(answered, or refused with the same exit status).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine import api, verbs
from engine.cli import commands, main, tree
from engine.cli.parser import build_parser
from engine.errors import CoopError
from engine.verbs.declare import OneOf, cli_of
from tests.integration.owner.conftest import RunningOwner

#: The one verb with no command of its own: `coop status` shows its snapshot, with more.
SHOWN_BY_STATUS = {"status_snapshot"}
COMMON = {"actor", "db"}


def _parameters(verb: Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(verb).parameters.values() if p.name != "unit"]


def public_function(name: str, verb: Any) -> Any:
    """The public function of a verb: `engine.<module>.<name>` for `engine.verbs.<module>`."""
    module = importlib.import_module(verb.__module__.replace("engine.verbs.", "engine.", 1))
    return getattr(module, name)


def _sample(verb: Any, name: str, annotation: str) -> Any:
    """A value for one parameter: the CLI's first choice where it restricts one, else by type."""
    cli = cli_of(verb)
    spelling = cli.spellings.get(name) if cli is not None else None
    if isinstance(spelling, OneOf):
        return spelling.flags[0][1]
    if spelling is not None and "choices" in spelling.settings:
        return spelling.settings["choices"][0]
    if name == "actor":
        return "owner"
    base = annotation.removesuffix(" | None")
    return {"int": 1, "bool": True, "float": 1.0}.get(base, f"{name} sample")


def sample_call(name: str, verb: Any) -> tuple[list[Any], dict[str, Any]]:
    """The call every surface makes: each parameter given, positionals by position."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for parameter in _parameters(verb):
        if parameter.name == "db":
            continue
        value = _sample(verb, parameter.name, verb.__annotations__[parameter.name])
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    return args, kwargs


def command_line(verb: Any, call: tuple[list[Any], dict[str, Any]]) -> list[str]:
    """The `coop` words that spell `call`, from the verb's `@command` alone."""
    cli = cli_of(verb)
    assert cli is not None
    args, kwargs = call
    given = {**dict(zip([p.name for p in _parameters(verb)], args, strict=False)), **kwargs}
    words = [word for word in cli.words if word is not None]
    for name, spelling in cli.spellings.items():
        value = given[name]
        if isinstance(spelling, OneOf):
            words.append(next(flag for flag, each in spelling.flags if each == value))
        elif spelling.positional:
            words.append(str(value))
        elif value is True:
            words.append(spelling.name)
        elif value is not False:
            words.extend([spelling.name, str(value)])
    return [*words, "--as", given["actor"]] if "actor" in given else words


CALLS = {name: sample_call(name, verb) for name, verb in verbs.VERBS.items()}
COMMANDED = [name for name, verb in verbs.VERBS.items() if cli_of(verb) is not None]


def test_every_verb_but_the_status_snapshot_has_a_command() -> None:
    assert set(verbs.VERBS) - set(COMMANDED) == SHOWN_BY_STATUS


@pytest.mark.parametrize("name", list(verbs.VERBS))
def test_the_public_function_is_the_verb_less_the_unit(name: str) -> None:
    verb = verbs.VERBS[name]
    public = public_function(name, verb)
    assert isinstance(public, api.Public)
    assert public.verb is verb
    assert public.__doc__ == verb.__doc__
    assert verb.__doc__
    assert list(inspect.signature(public).parameters.values()) == _parameters(verb)


@pytest.mark.parametrize("name", COMMANDED)
def test_the_command_line_parses_to_the_same_call(name: str, tmp_path: Path) -> None:
    verb = verbs.VERBS[name]
    words = [*command_line(verb, CALLS[name]), "--db", str(tmp_path / "x.db")]
    quick = tree.quick_parse(words)
    whole = build_parser(words).parse_args(words)
    assert quick is not None
    assert vars(quick) == vars(whole)
    positional, keywords = commands._call(verb, whole)
    assert keywords.pop("db") == str(tmp_path / "x.db")
    assert (positional, keywords) == tuple(CALLS[name])
    inspect.signature(public_function(name, verb)).bind(*positional, **keywords)


def _seed(db: str | None) -> None:
    """The same three rows on either ledger: todo #1, request #1, outbox row #1."""
    for words in (["todo", "add", "t"], ["request", "add", "r"], ["notify", "n"]):
        assert main([*words, "--as", "owner", *(["--db", db] if db else [])]) == 0


def _local(name: str, db: str) -> int:
    args, kwargs = CALLS[name]
    try:
        public_function(name, verbs.VERBS[name])(*args, **kwargs, db=db)
    except CoopError as exc:
        return exc.exit_status
    return 0


def _routed(name: str, running: RunningOwner) -> int:
    words = [*command_line(verbs.VERBS[name], CALLS[name]), "--db", str(running.db)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(words)


def test_every_verb_runs_alike_here_and_through_the_owner_service(
    running: RunningOwner, tmp_path: Path
) -> None:
    here = str(tmp_path / "local.db")
    with contextlib.redirect_stdout(io.StringIO()):
        _seed(here)
        _seed(str(running.db))
    filed_before = len(_filed(running.db))
    outcomes = {name: (_local(name, here), _routed(name, running)) for name in COMMANDED}
    assert {name: pair for name, pair in outcomes.items() if pair[0] != pair[1]} == {}
    assert any(local == 0 for local, _ in outcomes.values())
    assert _filed(running.db)[filed_before:] == COMMANDED  # each one reached the owner


def _filed(db: Path) -> list[str]:
    """The methods the owner's command log filed, oldest first."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute("SELECT method FROM coop_commands ORDER BY rowid")]
