"""`COOP_LOG_FORMAT` forces JSON or console lines whatever stderr is, and `COOP_LOG_TIMESTAMP=off`
leaves the time out of console lines only: checked on both logging twins (chief's and the
notifier's), whose output here goes to pytest's capture, not a terminal."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import pytest
import structlog

from chief.logs import configure_logging as chief_logging
from notifier.logs import configure_logging as notifier_logging

TWINS = pytest.mark.parametrize(
    "configure", [chief_logging, notifier_logging], ids=["chief", "notifier"]
)
COLOURS = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    """Leave structlog as the test found it, for the tests after it in this process."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


def one_line(configure: Callable[[], None], capsys: pytest.CaptureFixture[str]) -> str:
    configure()
    structlog.get_logger("t").info("door.started", chat=1)
    return COLOURS.sub("", capsys.readouterr().err.strip())


@TWINS
def test_unset_off_a_terminal_is_json(configure, capsys, monkeypatch) -> None:
    monkeypatch.delenv("COOP_LOG_FORMAT", raising=False)
    event = json.loads(one_line(configure, capsys))
    assert (event["event"], event["chat"]) == ("door.started", 1)
    assert "timestamp" in event


@TWINS
def test_console_is_forced_and_keeps_its_time_unless_told(configure, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COOP_LOG_FORMAT", "console")
    monkeypatch.delenv("COOP_LOG_TIMESTAMP", raising=False)
    line = one_line(configure, capsys)
    assert not line.startswith("{")
    assert "door.started" in line
    assert "chat=1" in line
    assert line[:4].isdigit()  # its ISO time first
    monkeypatch.setenv("COOP_LOG_TIMESTAMP", "off")
    assert "[info" in (bare := one_line(configure, capsys))
    assert not bare[:4].isdigit()


@TWINS
def test_json_is_forced_and_always_has_its_time(configure, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COOP_LOG_FORMAT", "JSON")
    monkeypatch.setenv("COOP_LOG_TIMESTAMP", "off")  # a file or journal needs the time
    assert "timestamp" in json.loads(one_line(configure, capsys))
