"""The terminal twins: `engine.terminal` and `chief.terminal`.

The packages share no code, so each keeps its own copy of the one rule for what reaches a
terminal. The two modules differ in their docstring only; the same properties run on both:

- `shown` leaves nothing a terminal acts on (C0, DEL, C1, the bidi controls, the line
  separators, a lone surrogate), escapes each such character and nothing else, and keeps every
  other character as it is;
- `shown_json` keeps a `json.dumps` document exact: `json.loads` reads the same value back.

The services' console log lines (on a terminal) show a logged value escaped too, by both
`configure_logging` twins (`chief.logs`, `notifier.logs`).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from chief import logs as chief_logs
from chief import terminal as chief_terminal
from engine import terminal as engine_terminal
from notifier import logs as notifier_logs

ROOT = Path(__file__).resolve().parents[2]
TWINS: dict[str, ModuleType] = {"engine": engine_terminal, "chief": chief_terminal}
#: Written here once more, on purpose: the test's own reading of the rule, not the module's.
ACTING = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[tnr])")
#: Any text at all, lone surrogates included (what argv's `surrogateescape` or JSON can spell).
ANY_TEXT = st.text(st.characters(codec=None, categories=None))


def code_without_docstring(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [ast.dump(node) for node in body]


def test_the_two_modules_are_the_same_code() -> None:
    assert code_without_docstring(ROOT / "chief" / "terminal.py") == code_without_docstring(
        ROOT / "engine" / "terminal.py"
    )


@pytest.mark.parametrize("twin", TWINS)
@given(text=ANY_TEXT)
def test_shown_leaves_nothing_a_terminal_acts_on(twin: str, text: str) -> None:
    printed = TWINS[twin].shown(text)
    assert not ACTING.search(printed)
    printed.encode("utf-8")  # a UTF-8 terminal can be given all of it


@pytest.mark.parametrize("twin", TWINS)
@given(text=ANY_TEXT)
def test_shown_escapes_each_acting_character_and_keeps_the_rest(twin: str, text: str) -> None:
    """Reading the escapes back gives the text again, when the text spells no escape itself."""
    printed = TWINS[twin].shown(text)
    if not ESCAPE.search(text):
        named = {"t": "\t", "n": "\n", "r": "\r"}
        back = ESCAPE.sub(
            lambda found: named.get(found.group(1)) or chr(int(found.group(1)[1:], 16)), printed
        )
        assert back == text
    if not ACTING.search(text):
        assert printed == text


@pytest.mark.parametrize("twin", TWINS)
@given(value=st.recursive(ANY_TEXT | st.integers() | st.none(), lambda inner: st.lists(inner)))
def test_shown_json_keeps_the_document_exact(twin: str, value: object) -> None:
    for ascii_only in (True, False):
        document = json.dumps({"v": value}, ensure_ascii=ascii_only, indent=2)
        printed = TWINS[twin].shown_json(document)
        assert not ACTING.search(printed.replace("\n", ""))
        assert json.loads(printed) == json.loads(document)


@pytest.mark.parametrize("twin", TWINS)
def test_the_sequences_seen_in_the_wild_are_shown_escaped(twin: str) -> None:
    shown = TWINS[twin].shown
    assert shown("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert shown("\x1b[2J\x9b2J") == "\\x1b[2J\\x9b2J"
    assert shown("a\x00b\rc\nd\te\x7f") == "a\\x00b\\rc\\nd\\te\\x7f"
    assert shown("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert shown("café ✅ 日本 \U0001f600") == "café ✅ 日本 \U0001f600"


@pytest.mark.parametrize("logs", [chief_logs, notifier_logs], ids=["chief", "notifier"])
def test_a_console_log_line_shows_an_outside_value_escaped(
    logs: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = structlog.get_config()
    try:
        logs.configure_logging(json=False)
        structlog.get_logger("t").warning("door.x", error="\x1b]0;pwned\x07\x1b[2J\x9b\u202e")
    finally:
        structlog.configure(**saved)
    err = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().err)  # the renderer's own colours
    assert not ACTING.search(err.replace("\n", ""))
    assert "\\x1b]0;pwned\\x07" in err
