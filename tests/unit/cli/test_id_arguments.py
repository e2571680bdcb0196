"""Every id a person types may be written as it is printed (issue 34, item 10): `#7` or `7`,
in every id argument of every `coop` and `chief` command. The class is closed over the command
tables themselves: a new command with an id argument is held to it without a new test. Both of
`coop`'s parses (the quick one and argparse) answer the same; a word that is no id is still a
usage error."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

import engine.cli
from chief import cli as chief_cli
from engine.cli.tree import COMMANDS, quick_parse
from tests.fuzz.argv import run_in_process
from tests.unit.cli.test_cli_parse import whole_tree_parser

Arg = tuple[tuple[str, ...], dict[str, Any]]


def is_id(names: tuple[str, ...], settings: dict[str, Any]) -> bool:
    """An argument that takes a row's id: its name, dest or metavar says so."""
    words = [*names, str(settings.get("dest", "")), str(settings.get("metavar", ""))]
    return any(word.lower().strip("-").replace("-", "_").endswith(("id", "_id")) for word in words)


def argv_for(words: list[str], args: list[Arg], id_word: str) -> list[str]:
    """A command line of `words` whose positionals are all given: each id as `id_word`, a
    positional with choices as its first, any other as `x`."""
    argv = list(words)
    for names, settings in args:
        if names[0].startswith("-"):
            continue
        if is_id(names, settings):
            argv.append(id_word)
        elif settings.get("choices"):
            argv.append(str(settings["choices"][0]))
        else:
            argv.append("x")
    return argv


def coop_cases() -> list[tuple[list[str], str]]:
    cases = []
    for (group, verb), command in COMMANDS.items():
        words = [group] + ([verb] if verb else [])
        for names, settings in command.arguments():
            if is_id(names, settings):
                dest = settings.get("dest", names[0].lstrip("-").replace("-", "_"))
                cases.append((argv_for(words, command.arguments(), "#7"), dest))
    return cases


def chief_cases() -> list[tuple[list[str], str]]:
    cases = []
    for name, command in chief_cli.COMMANDS.items():
        for names, settings in command.args:
            if is_id(names, settings):
                dest = settings.get("dest", names[0].lstrip("-").replace("-", "_"))
                cases.append((argv_for(name.split(), list(command.args), "#7"), dest))
    return cases


def test_coop_has_id_arguments_to_check() -> None:
    found = {" ".join(argv[:2]) for argv, _ in coop_cases()}
    assert {"request show", "todo done", "outbox retry", "history todo"} <= found


@pytest.mark.parametrize(
    ("argv", "dest"), coop_cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else x
)
def test_every_coop_id_argument_takes_the_id_as_printed(argv: list[str], dest: str) -> None:
    parsed = whole_tree_parser().parse_args(argv)
    assert getattr(parsed, dest) == 7
    quick = quick_parse(argv)
    assert quick is not None, argv
    assert getattr(quick, dest) == 7
    plain = [("7" if word == "#7" else word) for word in argv]
    assert getattr(whole_tree_parser().parse_args(plain), dest) == 7


@pytest.mark.parametrize(
    ("argv", "dest"), coop_cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else x
)
def test_a_word_that_is_no_id_is_still_a_usage_error(argv: list[str], dest: str) -> None:
    for bad in ("#", "##7", "#x", "7#"):
        wrong = [(bad if word == "#7" else word) for word in argv]
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
            whole_tree_parser().parse_args(wrong)
        assert exited.value.code == 2
        assert f"invalid id value: '{bad}'" in err.getvalue()


@pytest.mark.parametrize(("argv", "dest"), chief_cases())
def test_every_chief_id_argument_takes_the_id_as_printed(argv: list[str], dest: str) -> None:
    parser: argparse.ArgumentParser = chief_cli._parser()
    assert getattr(parser.parse_args(argv), dest) == 7


@pytest.mark.parametrize(
    ("argv", "dest"), coop_cases(), ids=lambda x: " ".join(x) if isinstance(x, list) else x
)
def test_a_missing_id_says_how_to_give_one_as_printed(
    argv: list[str], dest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`coop request show #7` in a shell runs `coop request show`: the shell takes `#7` for a
    comment. The one line says how an id is given."""
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "builder")
    cut = argv[: argv.index("#7")]
    done = run_in_process(engine.cli.main, cut)
    assert done.code == 2, done
    (line,) = done.err.splitlines()
    assert "give an id as 7 or '#7' (quoted: a shell drops an unquoted # and what follows)" in line
