"""The `coop` command line: the quick parse answers exactly what argparse answers, or leaves
the line to argparse; the parser built for one named verb prints the same help and the same
errors as the whole tree."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.cli.parser import build_parser
from engine.cli.tree import COMMANDS, GROUP_HELP, GROUP_VERBS, quick_parse


@functools.cache
def whole_tree_parser() -> argparse.ArgumentParser:
    """The whole tree, built once: the authority every other parse is held to."""
    return build_parser(None)


def argparse_answer(argv: list[str], *, whole_tree: bool = True) -> dict[str, object] | None:
    """What argparse makes of `argv` (the whole tree, or the tree built for `argv`); None when
    it prints help or an error and exits."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            parser = whole_tree_parser() if whole_tree else build_parser(argv)
            parsed = parser.parse_args(argv)
        except SystemExit:
            return None
    return vars(parsed)


def quick_answer(argv: list[str]) -> dict[str, object] | None:
    parsed = quick_parse(argv)
    return None if parsed is None else vars(parsed)


def command_words(group: str, verb: str | None) -> list[str]:
    return [group] if verb is None else [group, verb]


PLAIN_LINES = [
    ["todo", "add", "Water the plants"],
    ["todo", "add", "x", "--body", "b"],
    ["todo", "add", ""],
    ["--as", "builder", "todo", "take", "1"],
    ["--db=/tmp/x.db", "todo", "take", "1", "--force"],
    ["todo", "release", "2", "--reason", "blocked", "--as", "me"],
    ["todo", "done", "1"],
    ["todo", "done", "--summary", "watered", "1", "--commit=abc", "--force"],
    ["todo", "abandon", "3", "--reason=no"],
    ["request", "add", "Review", "--to", "reviewer"],
    ["request", "close", "1", "--summary", "s"],
    ["list"],
    ["list", "--todos", "--all", "--json"],
    ["history", "request", "4"],
    ["notify", "hello", "--kind", "alert"],
    ["outbox", "list", "--state", "pending", "--limit", "5"],
    ["outbox", "retry", "7"],
    ["outbox", "cancel", "7", "--reason", "stale"],
    ["worker", "unlock", "--reason", "wedged"],
    ["status", "--check", "--max-pending-age", "30"],
    ["serve"],
    ["cutover", "--socket", "/var/lib/coop/service.sock"],
    ["cutover", "--undo"],
    ["reconcile", "abc-123"],
]


@pytest.mark.parametrize("argv", PLAIN_LINES, ids=" ".join)
def test_a_plain_line_is_parsed_quickly_and_exactly_as_argparse_does(argv: list[str]) -> None:
    quick = quick_answer(argv)
    assert quick is not None, "the quick parse left a plain line to argparse"
    assert quick == argparse_answer(argv)


LEFT_TO_ARGPARSE = [
    ["--help"],
    ["todo", "--help"],
    ["todo", "done", "--help"],
    ["todo", "done", "-h"],
    ["--version"],
    ["todo"],
    ["todo", "bogus"],
    ["bogus"],
    ["todo", "done"],
    ["todo", "done", "x"],
    ["todo", "done", "1", "2"],
    ["todo", "done", "1", "--sum", "abbreviated"],
    ["todo", "done", "-1"],
    ["todo", "add", "--", "-x"],
    ["todo", "done", "1", "--force=yes"],
    ["todo", "done", "1", "--summary"],
    ["todo", "done", "1", "--summary", "-starts with a dash"],
    ["list", "--todos", "--requests"],
    ["history", "bug", "1"],
    ["outbox", "list", "--state", "lost"],
    ["cutover", "--socket", "/x.sock", "--undo"],
    ["--as", "x", "--bogus", "todo", "add", "y"],
    ["--as="],
    ["cutover", "--socket=--"],
]


@pytest.mark.parametrize("argv", LEFT_TO_ARGPARSE, ids=" ".join)
def test_help_errors_and_unusual_lines_are_left_to_argparse(argv: list[str]) -> None:
    assert quick_parse(argv) is None


def _tokens(group: str, verb: str | None) -> st.SearchStrategy[list[str]]:
    options = [
        name for names, _ in COMMANDS[(group, verb)].arguments() for name in names if name[0] == "-"
    ]
    values = st.sampled_from(["1", "07", "-1", "x", "", "todo", "pending", "a b", "-x", "--"])
    word = st.one_of(
        values,
        st.sampled_from([*options, "--as", "--db", "--help", "--for", "--su", "-h"]),
        st.builds(lambda o, v: f"{o}={v}", st.sampled_from([*options, "--as"]), values),
    )
    return st.lists(word, max_size=6)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    group, verb = draw(st.sampled_from(sorted(COMMANDS, key=str)))
    top = draw(st.sampled_from([[], ["--as", "me"], ["--db=/tmp/c.db"], ["--as", "--db"]]))
    return [*top, *command_words(group, verb), *draw(_tokens(group, verb))]


@settings(max_examples=300, deadline=None)
@given(command_lines())
def test_the_quick_parse_never_answers_otherwise_than_argparse(argv: list[str]) -> None:
    quick = quick_answer(argv)
    if quick is not None:
        assert quick == argparse_answer(argv)


@settings(max_examples=150, deadline=None)
@given(command_lines())
def test_the_tree_built_for_a_line_parses_it_as_the_whole_tree_does(argv: list[str]) -> None:
    assert argparse_answer(argv, whole_tree=False) == argparse_answer(argv)


def _printed(argv: list[str], *, whole_tree: bool) -> tuple[str, str, int]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            build_parser(None if whole_tree else argv).parse_args(argv)
        except SystemExit as exc:
            return out.getvalue(), err.getvalue(), int(exc.code or 0)
    raise AssertionError(f"{argv} did not exit")


EVERY_COMMAND = [[], *([g] for g in GROUP_VERBS), *(command_words(*key) for key in COMMANDS)]


@pytest.mark.parametrize("words", EVERY_COMMAND, ids=lambda words: " ".join(words) or "coop")
def test_help_is_complete_everywhere_and_the_same_as_the_whole_trees(words: list[str]) -> None:
    printed, _, status = _printed([*words, "--help"], whole_tree=False)
    assert status == 0
    assert (printed, status) == _printed([*words, "--help"], whole_tree=True)[::2]
    if not words:
        assert all(group in printed for group in GROUP_HELP)
    elif len(words) == 1 and words[0] in GROUP_VERBS:
        assert all(verb in printed for verb in GROUP_VERBS[words[0]])
    else:
        command = COMMANDS[(words[0], words[1] if len(words) > 1 else None)]
        for names, settings_ in command.arguments():
            choices = settings_.get("choices")
            shown = settings_.get("metavar") if not names[0].startswith("-") else None
            label = shown or names[0]
            assert (label if choices is None else "{" + ",".join(choices) + "}") in printed
        assert "--as ACTOR" in printed


def test_main_prints_help_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["todo", "add", "--help"])
    assert exited.value.code == 0
    assert "usage: coop todo add" in capsys.readouterr().out
