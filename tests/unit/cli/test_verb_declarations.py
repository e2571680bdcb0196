"""A verb's `@command` is checked against its signature when the command tree is derived: a
spelling of no parameter, or a required parameter the command line could not give, stops the
import of `engine.cli.tree` naming both, before any `coop` runs."""

from __future__ import annotations

import pytest

from engine.cli import tree
from engine.verbs.declare import cli_of, command, opt, pos


def test_a_declaration_that_does_not_fit_its_signature_is_refused() -> None:
    @command("todo frob", "a mistyped declaration", todo_id=pos("id"), reson=opt("--reason"))
    def frob_todo(unit: object, todo_id: int, *, actor: str, reason: str) -> dict:
        raise AssertionError

    declared = cli_of(frob_todo)
    assert declared is not None
    with pytest.raises(TypeError, match=r"spells no parameter \['reson'\].*\['reason'\]"):
        tree._command(frob_todo, declared)


def test_a_parameter_with_a_default_may_stay_off_the_command_line() -> None:
    @command("todo frob", "a verb with a library-only knob", todo_id=pos("id"))
    def frob_todo(unit: object, todo_id: int, *, actor: str, knob: int = 3) -> dict:
        raise AssertionError

    declared = cli_of(frob_todo)
    assert declared is not None
    assert [names for names, _ in tree._command(frob_todo, declared).arguments()] == [("todo_id",)]
