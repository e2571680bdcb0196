"""The CLIs' usage edges (issue 27): a mistyped command or verb suggests the closest ones and
names no parser internal (argparse's `dest`s `group`, `verb`, `COMMAND`); a usage error points
at the command's own `--help`; a value is echoed as the caller typed it; a hint names the
command that helps. `coop` and `chief` alike, in-process, on a scratch data folder.

The property at the end closes the family: any word typed where a command or a verb goes, and
any unknown option after a command, is answered in one line that names no parser internal and
points at the nearest `--help`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.cli
from chief import cli as chief_cli
from engine.cli.tree import COMMANDS, GROUP_HELP, GROUP_VERBS
from tests.fuzz.argv import Outcome, run_in_process

#: What argparse calls its subparsers' results, which a person never typed.
INTERNALS = re.compile(r"argument (group|verb|COMMAND)\b|required: (group|verb|COMMAND)\b")


@pytest.fixture(autouse=True)
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "builder")
    monkeypatch.delenv("COOP_DB", raising=False)
    monkeypatch.delenv("CHIEF_DB", raising=False)


def coop(*argv: str) -> Outcome:
    return run_in_process(engine.cli.main, list(argv))


def chief(*argv: str) -> Outcome:
    return run_in_process(chief_cli.main, list(argv))


def one_line(outcome: Outcome) -> str:
    assert outcome.code == 2, outcome
    lines = outcome.err.splitlines()
    assert len(lines) == 1, outcome.err
    assert not INTERNALS.search(lines[0]), lines[0]
    return lines[0]


def test_a_mistyped_command_suggests_the_closest() -> None:
    assert (
        one_line(coop("todoo")) == "coop: no command 'todoo'; did you mean todo? (see coop --help)"
    )


def test_a_mistyped_verb_suggests_the_closest() -> None:
    assert (
        one_line(coop("--as", "x", "todo", "tak", "1"))
        == "coop todo: no verb 'tak'; did you mean take? (see coop todo --help)"
    )


def test_a_word_like_no_command_lists_them_instead() -> None:
    line = one_line(coop("zzzz"))
    assert line.startswith("coop: no command 'zzzz'; the commands are todo, request, "), line
    assert line.endswith(" (see coop --help)")


def test_a_missing_command_or_verb_is_asked_for_by_name() -> None:
    assert one_line(coop()).startswith("coop: name a command: todo, request, ")
    assert one_line(coop("todo")).startswith("coop todo: name a verb: add, take, ")


def test_a_usage_error_points_at_the_commands_own_help() -> None:
    assert one_line(coop("list", "--bogus")) == (
        "coop: unrecognized arguments: --bogus (see coop list --help)"
    )
    assert one_line(coop("todo", "take", "1", "--bogus")).endswith("(see coop todo take --help)")


def test_a_value_is_echoed_as_typed() -> None:
    done = coop("status", "--check", "--max-pending-age", "-1")
    assert done.code == 2, done
    assert done.err == "coop: --max-pending-age must be a positive number of seconds, not '-1'\n"


def test_a_missing_outbox_row_points_at_the_outbox_list() -> None:
    done = coop("outbox", "retry", "42")
    assert done.code == 2, done
    assert "`coop outbox list`" in done.err, done.err


def test_chief_suggests_and_points_at_the_commands_own_help() -> None:
    assert one_line(chief("lgo")) == (
        "chief: no command 'lgo'; did you mean log? (see chief --help)"
    )
    assert one_line(chief("telegram", "pairr")) == (
        "chief telegram: no command 'pairr'; did you mean pair or unpair?"
        " (see chief telegram --help)"
    )
    assert one_line(chief("log", "--bogus")) == (
        "chief: unrecognized arguments: --bogus (see chief log --help)"
    )
    assert one_line(chief()).startswith("chief: name a command: log, report, ")


# ---- the family ------------------------------------------------------------------------------

word = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=8
)
COOP_GROUPS = sorted(GROUP_HELP)
COOP_VERB_LINES = sorted(COMMANDS, key=lambda key: (key[0], key[1] or ""))


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    head=st.sampled_from([[], *([g] for g in GROUP_VERBS), ["--as", "x"]]),
    typed=word,
)
def test_any_word_where_a_command_goes_is_one_line_without_internals(
    head: list[str], typed: str
) -> None:
    group = head[0] if head and head[0] in GROUP_VERBS else None
    if typed.startswith("-") or typed in (GROUP_VERBS[group] if group else GROUP_HELP):
        return  # an option, or a command after all: not this family
    line = one_line(coop(*head, typed))
    assert re.search(r"\(see coop( \S+)* --help\)$", line), line


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(key=st.sampled_from(COOP_VERB_LINES), option=st.from_regex(r"--[a-z]{5,9}", fullmatch=True))
def test_an_unknown_option_points_at_that_commands_help(
    key: tuple[str, str | None], option: str
) -> None:
    words = [w for w in key if w is not None]
    known = {n for names, _ in COMMANDS[key].arguments() for n in names} | {"--as", "--db"}
    if any(name.startswith(option) for name in known):
        return  # an abbreviation of a real option
    line = one_line(coop(*words, option))
    assert line.endswith(f"(see coop {' '.join(words)} --help)"), line


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(head=st.sampled_from([[], ["telegram"]]), typed=word)
def test_chief_any_word_where_a_command_goes_is_one_line_without_internals(
    head: list[str], typed: str
) -> None:
    known = {name.split()[-1] for name in chief_cli.COMMANDS if name.startswith(" ".join(head))}
    if typed.startswith("-") or typed in known or typed in {"telegram", *chief_cli.DISPATCHED}:
        return
    line = one_line(chief(*head, typed))
    assert re.search(r"\(see chief( \S+)* --help\)$", line), line
