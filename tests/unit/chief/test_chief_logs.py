"""configure_logging: one JSON object per line when asked (the production shape)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import structlog

from chief.logs import configure_logging


@pytest.fixture(autouse=True)
def _restore_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


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
    plain = re.sub(r"\x1b\[[0-9;]*m", "", err)
    assert "chief.opened" in plain
    assert "chief_id=1" in plain
