"""The Telegram bounds: a getMe that hangs fails the send at TELEGRAM_TIMEOUT_S (nothing was sent
to the chat); a sendMessage that went out is awaited past that deadline (the status shows it
slow) up to the late-reply bound (`LATE_REPLY_FACTOR` x TELEGRAM_TIMEOUT_S), and then counts as
in doubt: its row rings once more, marked as a possible repeat. The notify itself never waits
on Telegram past its short ring wait."""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from chief.phone.pacing import REPEAT_MARKER
from chief.phone.ringer import RING_WAIT_S
from chief.telegram.sender import LATE_REPLY_FACTOR
from tests.support.door import DoorStack, body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

TELEGRAM_TIMEOUT_S = 1.0
LATE_BOUND_S = LATE_REPLY_FACTOR * TELEGRAM_TIMEOUT_S
SLOW_GET_ME_S = 0.6 * TELEGRAM_TIMEOUT_S  # answered, but late: inside any per-call timeout
STUCK_S = 30.0


def _door_with(
    tmp_path: Path, faults: list[dict[str, object]]
) -> AbstractAsyncContextManager[DoorStack]:
    """A door whose emulator plays `faults`, at this file's Telegram deadline; the test's client
    waits as long as a stuck send."""
    settings = {"TELEGRAM_TIMEOUT_S": str(TELEGRAM_TIMEOUT_S)}
    return door_stack(tmp_path, settings=settings, faults=faults, client_timeout_s=STUCK_S)


async def test_door_sender_awaits_a_stuck_send_up_to_the_late_bound_then_repeats_it_marked(
    tmp_path: Path,
) -> None:
    faults = [
        # getMe fails at start, so the first send initialises the Bot again ...
        {"mode": "5xx", "methods": ["getMe"], "count": 1},
        # ... and that getMe answers slowly, then sendMessage hangs for 30 s.
        {"mode": "delay", "methods": ["getMe"], "count": 1, "delay_s": SLOW_GET_ME_S},
        {"mode": "delay", "methods": ["sendMessage"], "count": 1, "delay_s": STUCK_S},
    ]
    async with _door_with(tmp_path, faults) as stack:
        with capture_logs() as logs:
            started = time.monotonic()
            response = await stack.notify(body("hang-1", text="hang 1"))
            answered_s = time.monotonic() - started
            assert response.status_code == 200, response.text
            assert response.json()["telegram"] == "queued"
            assert answered_s <= RING_WAIT_S + 0.5, f"answered after {answered_s:.2f} s"

            async def slow() -> bool:
                queue = (await stack.status()).json()["telegram_queue"]
                return bool(queue["send_slow"])

            await wait_until(slow, timeout_s=LATE_BOUND_S, what="the status to show a slow send")
            await wait_until(
                lambda: any(e["event"] == "door.send_in_doubt" for e in logs),
                timeout_s=2 * STUCK_S,
                what="the sender to give the answer up",
            )
            gave_up_s = time.monotonic() - started
        assert gave_up_s <= SLOW_GET_ME_S + LATE_BOUND_S + 1.0, f"gave up after {gave_up_s:.2f} s"
        assert gave_up_s >= LATE_BOUND_S, f"gave up after {gave_up_s:.2f} s, inside the bound"
        doubt = next(e for e in logs if e["event"] == "door.send_in_doubt")
        assert "late-reply bound" in doubt["reason"]
        assert doubt["delivery_keys"] == ["hang-1"]
        # Telegram recovers: the row rings once more, marked as a possible repeat.
        await wait_until(
            lambda: len(stack.emulator.texts()) == 2, timeout_s=10, what="the marked repeat"
        )
        assert stack.emulator.texts() == ["hang 1", REPEAT_MARKER + "hang 1"]
        queue = (await stack.status()).json()["telegram_queue"]
        assert queue["in_doubt_events"] == 1


async def test_door_sender_gives_up_a_hanging_get_me_at_the_deadline_and_rings_once(
    tmp_path: Path,
) -> None:
    faults = [
        {"mode": "5xx", "methods": ["getMe"], "count": 1},
        {"mode": "delay", "methods": ["getMe"], "count": 1, "delay_s": STUCK_S},
    ]
    async with _door_with(tmp_path, faults) as stack:
        with capture_logs() as logs:
            started = time.monotonic()
            assert (await stack.notify(body("hang-2", text="hang 2"))).status_code == 200
            await wait_until(
                lambda: any(e["event"] == "door.send_failed" for e in logs),
                timeout_s=2 * STUCK_S,
                what="the sender to give up",
            )
            gave_up_s = time.monotonic() - started
        assert gave_up_s <= TELEGRAM_TIMEOUT_S + 1.0, f"gave up after {gave_up_s:.2f} s"
        failed = next(e for e in logs if e["event"] == "door.send_failed")
        assert "TELEGRAM_TIMEOUT_S" in failed["error"]
        await wait_until(lambda: stack.emulator.texts(), timeout_s=10, what="the retry to ring")
        assert stack.emulator.texts() == ["hang 2"]  # nothing was in doubt: no repeat
        assert not any(e["event"] == "door.send_in_doubt" for e in logs)
