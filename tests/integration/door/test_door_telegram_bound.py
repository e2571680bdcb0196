"""The Telegram bound is one overall deadline: however many calls python-telegram-bot makes for
one send (getMe to initialise, then sendMessage), the door answers within TELEGRAM_TIMEOUT_S of
asking, so it always answers before the engine's client gives up."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.integration.door.door_env import body, door_stack

pytestmark = pytest.mark.timeout(60)

TELEGRAM_TIMEOUT_S = 3.0
SLOW_GET_ME_S = 0.6 * TELEGRAM_TIMEOUT_S  # answered, but late: inside any per-call timeout
STUCK_S = 30.0


async def test_door_answers_503_within_the_telegram_bound_when_telegram_hangs(
    tmp_path: Path,
) -> None:
    faults = [
        # getMe fails at start, so the first send initialises the Bot again ...
        {"mode": "5xx", "methods": ["getMe"], "count": 1},
        # ... and that getMe answers slowly, then sendMessage hangs for 30 s.
        {"mode": "delay", "methods": ["getMe"], "count": 1, "delay_s": SLOW_GET_ME_S},
        {"mode": "delay", "methods": ["sendMessage"], "count": 1, "delay_s": STUCK_S},
    ]
    settings = {"TELEGRAM_TIMEOUT_S": str(TELEGRAM_TIMEOUT_S)}
    async with door_stack(
        tmp_path, settings=settings, faults=faults, client_timeout_s=STUCK_S
    ) as stack:
        started = time.monotonic()
        response = await stack.notify(body("hang-1"))
        elapsed_s = time.monotonic() - started
        assert (response.status_code, response.json()) == (
            503,
            {"detail": "notification_channel_unavailable"},
        )
        assert elapsed_s <= TELEGRAM_TIMEOUT_S + 1.0, f"answered after {elapsed_s:.2f} s"
