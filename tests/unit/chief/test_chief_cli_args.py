"""The `chief` CLI's argument handling: --version, one-line usage errors, dispatch."""

from __future__ import annotations

import sys
import types

import pytest

from chief import cli


def test_version_prints_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("chief (coop-notifier) ")


@pytest.mark.parametrize(
    "argv", [[], ["nonsense"], ["log", "--limit", "0"], ["log", "--limit", "x"], ["log", "--bad"]]
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1


def test_subcommands_are_dispatched_with_the_rest_of_argv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[str]] = []
    # A stand-in for the door's module (another engineer's code, not under test here).
    door = types.ModuleType("tests_fake_door")
    door.main = lambda argv: seen.append(argv) or 7  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_fake_door", door)
    monkeypatch.setitem(cli.DISPATCHED, "serve", "tests_fake_door")
    assert cli.main(["serve", "--port", "0", "--log-json"]) == 7
    assert seen == [["--port", "0", "--log-json"]]


def test_a_missing_subcommand_module_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.DISPATCHED, "serve", "chief.no_such_module")
    assert cli.main(["serve"]) == 2
    assert "serve" in capsys.readouterr().err
