"""Telegram's failures in people's words (issue 34, item 10): a 5xx from the Bot API reads as
its HTTP status in words (`502 Bad Gateway`), never as python-telegram-bot's class name, in the
door's status (what `coop status` and the phone's `/status` print as the last error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.ops.conftest import notify
from tests.integration.ops.test_ops_status_telegram import (
    QUEUED,
    Clock,
    door_with_telegram,
    telegram_queue,
)
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("status", "words"),
    [(502, "502 Bad Gateway"), (500, "500 Internal Server Error"), (504, "504 Gateway Timeout")],
)
def test_a_bot_api_5xx_is_named_by_its_status_in_words(home: Path, status: int, words: str) -> None:
    faults = [{"mode": "5xx", "count": 1000, "status": status}]
    with door_with_telegram(home, Clock(), faults) as door:
        assert notify(door.socket_path, "1") in QUEUED
        error = wait_until_sync(
            lambda: telegram_queue(door)["last_error"], what="the first failed send"
        )
    assert words in error, error
    assert "NetworkError" not in error, error
