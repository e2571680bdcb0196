"""Every name pattern in the three packages matches the whole name, and nothing after it.

Python's `$` also matches before a trailing newline, so `re.match(r"^[a-z]+$", "backup\\n")`
succeeds: `chief report --source $'cron:backup\\n'` was accepted that way. The rule: a pattern for
`re` is anchored by `fullmatch`, never by `$`. Pydantic's `Field(pattern=...)` runs on Rust's
regex engine, where `$` is the end of the text only; the test below holds every such pattern in
the packages to that, with a name the pattern accepts and the same name with a newline after it.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("engine", "notifier", "chief")
RE_CALLS = {"compile", "match", "search", "fullmatch"}
#: A module that can hold a pattern names one of these (ruff format never splits `re.compile`).
MENTIONS = re.compile(r"\bre\.(?:" + "|".join(sorted(RE_CALLS)) + r")\b|\bField\(")


@functools.cache
def _sources() -> tuple[tuple[Path, ast.AST], ...]:
    """The modules that can hold a pattern, each parsed once: the scans run at collection, in
    every worker (parsing all of the packages' modules there, twice, cost ~1 s of CPU a worker)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if MENTIONS.search(text):
                found.append((path, ast.parse(text)))
    return tuple(found)


def _re_patterns() -> list[tuple[str, str]]:
    """(where, pattern) of every constant pattern given to `re.compile/match/search/fullmatch`."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in RE_CALLS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.args[0].value))
    return found


def _pydantic_patterns() -> list[tuple[str, str]]:
    """(where, pattern) of every `Field(pattern=...)` with a constant pattern."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field":
                for keyword in node.keywords:
                    if keyword.arg == "pattern" and isinstance(keyword.value, ast.Constant):
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        found.append((where, str(keyword.value.value)))
    return found


def test_the_scan_finds_the_patterns_it_is_about() -> None:
    assert any("chief/cron.py" in where for where, _ in _re_patterns())
    assert any("report_route.py" in where for where, _ in _pydantic_patterns())


@pytest.mark.parametrize(("where", "pattern"), _re_patterns(), ids=lambda value: str(value))
def test_no_re_pattern_ends_in_a_dollar(where: str, pattern: str) -> None:
    """`$` lets a trailing newline through: anchor with `fullmatch` (or `\\Z`) instead."""
    assert not re.search(r"(?<!\\)\$$", pattern), f"{where}: {pattern!r} ends in `$`"


@pytest.mark.parametrize(("where", "pattern"), _pydantic_patterns(), ids=lambda value: str(value))
def test_a_pydantic_pattern_refuses_a_name_with_a_trailing_newline(
    where: str, pattern: str
) -> None:
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=pattern)])
    core = pattern.removeprefix("^").removesuffix("$")

    @settings(max_examples=20, deadline=None)
    @given(name=st.from_regex(core, fullmatch=True).filter(lambda name: "\n" not in name))
    def check(name: str) -> None:
        assert adapter.validate_python(name) == name
        for tail in ("\n", "\r\n"):
            with pytest.raises(ValidationError):
                adapter.validate_python(name + tail)
            with pytest.raises(ValidationError):
                adapter.validate_json(f'"{name}\\n"')

    check()
