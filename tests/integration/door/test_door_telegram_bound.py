"""The Telegram bound is one overall deadline: however many calls python-telegram-bot makes for
one send (getMe to initialise, then sendMessage), the sender gives up within TELEGRAM_TIMEOUT_S
of asking. The notify itself no longer waits on Telegram at all: it answers at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from chief.door.ringer import RING_WAIT_S
from tests.support.door import body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

TELEGRAM_TIMEOUT_S = 3.0
SLOW_GET_ME_S = 0.6 * TELEGRAM_TIMEOUT_S  # answered, but late: inside any per-call timeout
STUCK_S = 30.0


async def test_door_sender_gives_up_within_the_telegram_bound_when_telegram_hangs(
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
        with capture_logs() as logs:
            started = time.monotonic()
            response = await stack.notify(body("hang-1"))
            answered_s = time.monotonic() - started
            assert response.status_code == 200, response.text
            assert response.json()["telegram"] == "queued"
            assert answered_s <= RING_WAIT_S + 0.5, f"answered after {answered_s:.2f} s"
            await wait_until(
                lambda: any(e["event"] == "door.send_failed" for e in logs),
                timeout_s=2 * STUCK_S,
                what="the sender to give up",
            )
            gave_up_s = time.monotonic() - started
        assert gave_up_s <= TELEGRAM_TIMEOUT_S + 1.0, f"gave up after {gave_up_s:.2f} s"
        failed = next(e for e in logs if e["event"] == "door.send_failed")
        assert "TELEGRAM_TIMEOUT_S" in failed["error"]
        # Telegram recovers: the entry rings on the sender's next try.
        await wait_until(lambda: stack.emulator.texts(), timeout_s=10, what="the retry to ring")
