"""plumbing.logs, every service's one structlog set-up, its output in pytest's capture (not a
terminal):

- JSON is one object per line, and configuring twice is the same set-up;
- `COOP_LOG_FORMAT` forces JSON or console lines whatever stderr is, and `COOP_LOG_TIMESTAMP=off`
  leaves the time out of console lines only;
- a console line shows a logged outside value escaped (`plumbing.terminal`'s rule).

That a line leaves the process in one write is tests/integration/plumbing/test_log_lines_whole.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import structlog

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
