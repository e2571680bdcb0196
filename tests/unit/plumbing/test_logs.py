"""plumbing.logs, every service's one structlog set-up, its output in pytest's capture (not a
terminal):

- JSON is one object per line, and configuring twice is the same set-up;
- `COOP_LOG_FORMAT` forces JSON or console lines whatever stderr is, and `COOP_LOG_TIMESTAMP=off`
  leaves the time out of console lines only;
- a console line shows a logged outside value escaped (`plumbing.terminal`'s rule);
- a console line reads as words, never Python literals (`True`, `None`, `'quoted'`, `[...]`),
  and splits into its fields without doubt whatever the values (a property over them).

That a line leaves the process in one write is tests/integration/plumbing/test_log_lines_whole.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from plumbing.logs import configure_logging

COLOURS = re.compile(r"\x1b\[[0-9;]*m")
#: A terminal acts on these (the test's own reading of plumbing.terminal's rule).
ACTING = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """Leave structlog as the test found it, for the tests after it in this process."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    configure_logging()
    structlog.get_logger("t").info("door.started", chat=1)
    return COLOURS.sub("", capsys.readouterr().err.strip())


def test_json_logging_is_one_object_per_line_and_idempotent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json=True)
    configure_logging(json=True)
    structlog.get_logger("chief").info("chief.report.landed", message_id=3)
    (line,) = capsys.readouterr().err.splitlines()
    event = json.loads(line)
    assert event["event"] == "chief.report.landed"
    assert event["message_id"] == 3
    assert event["level"] == "info"


def test_console_logging_is_coloured_key_value(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(json=False)
    structlog.get_logger("chief").info("chief.opened", chief_id=1)
    err = capsys.readouterr().err
    assert "\x1b[" in err  # coloured on a terminal
    plain = COLOURS.sub("", err)
    assert "chief.opened" in plain
    assert "chief_id=1" in plain


def test_unset_off_a_terminal_is_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COOP_LOG_FORMAT", raising=False)
    event = json.loads(one_line(capsys))
    assert (event["event"], event["chat"]) == ("door.started", 1)
    assert "timestamp" in event


def test_console_is_forced_and_keeps_its_time_unless_told(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_LOG_FORMAT", "console")
    monkeypatch.delenv("COOP_LOG_TIMESTAMP", raising=False)
    line = one_line(capsys)
    assert not line.startswith("{")
    assert "door.started" in line
    assert "chat=1" in line
    assert line[:4].isdigit()  # its ISO time first
    monkeypatch.setenv("COOP_LOG_TIMESTAMP", "off")
    assert "[info" in (bare := one_line(capsys))
    assert not bare[:4].isdigit()


def test_json_is_forced_and_always_has_its_time(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_LOG_FORMAT", "JSON")
    monkeypatch.setenv("COOP_LOG_TIMESTAMP", "off")  # a file or journal needs the time
    assert "timestamp" in json.loads(one_line(capsys))


def test_a_console_log_line_shows_an_outside_value_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging(json=False)
    structlog.get_logger("t").warning("door.x", error="\x1b]0;pwned\x07\x1b[2J\x9b\u202e")
    err = COLOURS.sub("", capsys.readouterr().err)  # the renderer's own colours
    assert not ACTING.search(err.replace("\n", ""))
    assert "\\x1b]0;pwned\\x07" in err


# -- a console line a person reads ---------------------------------------------------------------

#: One field of a console line: a bare word, or a double-quoted text with `\\` and `\"` escaped.
FIELD = re.compile(r'([a-z][a-z0-9_]*)=("(?:[^"\\]|\\.)*"|[^ "\\]+)(?: +|$)')
ESCAPE = re.compile(r'\\(\\|"|n|t|r|x[0-9a-f]{2}|u[0-9a-f]{4})')
SCALARS = st.booleans() | st.none() | st.integers()
VALUES = st.text() | SCALARS | st.lists(st.text() | SCALARS, max_size=4)
SPOKEN = {True: "yes", False: "no", None: "-"}


def console_line(**fields: object) -> str:
    """One console line logged with `fields`, the renderer's colours taken off, from after the
    event's name."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        configure_logging(json=False)
        structlog.get_logger("t").info("t.values", **fields)
    text = COLOURS.sub("", err.getvalue())
    assert text.endswith("\n"), f"not a line: {text!r}"
    assert text.count("\n") == 1, f"not one line: {text!r}"
    return text.split("t.values", 1)[1].strip(" \n")


def fields_of(line: str) -> dict[str, str]:
    """The line's fields, each value as written; fails unless the line is nothing but them."""
    found: dict[str, str] = {}
    at = 0
    while at < len(line):
        field = FIELD.match(line, at)
        assert field, f"no field at {line[at:]!r} in {line!r}"
        found[field.group(1)] = field.group(2)
        at = field.end()
    return found


def unquoted(value: str) -> str:
    if not value.startswith('"'):
        return value
    return ESCAPE.sub(lambda m: _unescaped(m.group(1)), value[1:-1])


def _unescaped(code: str) -> str:
    named = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
    return named.get(code) or chr(int(code[1:], 16))


def _scalar(value: object) -> str:
    return SPOKEN[value] if value is None or isinstance(value, bool) else str(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b_id", "c", "hint", "zz"]), VALUES, min_size=1))
def test_a_console_line_reads_as_words_and_splits_into_its_fields(
    values: dict[str, object],
) -> None:
    saved = structlog.get_config()
    try:
        line = console_line(**values)
    finally:
        structlog.configure(**saved)
    fields = fields_of(line)
    assert list(fields) == sorted(values), line
    for key, value in values.items():
        written = fields[key]
        if isinstance(value, str):
            assert unquoted(written) == value, (key, written)
        elif isinstance(value, list):
            if not value:
                assert written == "-"
            elif not any(isinstance(item, str) for item in value):
                assert written == ",".join(_scalar(item) for item in value), written
        else:
            assert written == _scalar(value), written
        if not isinstance(value, str) and not (
            isinstance(value, list) and any(isinstance(i, str) for i in value)
        ):
            assert not re.search(r"['\[\]]|True|False|None", written), written


def test_the_doors_start_line_reads_as_words(capsys: pytest.CaptureFixture[str]) -> None:
    line = console_line(
        host="127.0.0.1",
        owner_configured=True,
        posture_file=None,
        delivery_keys=["d-ca28", "d-ca29"],
        hint="set CHIEF_OWNER and restart",
    )
    assert line == (
        'delivery_keys=d-ca28,d-ca29 hint="set CHIEF_OWNER and restart" host=127.0.0.1'
        " owner_configured=yes posture_file=-"
    )
