"""Telegram's permanent refusals, answered by the emulator as the Bot API answers them (a bot
token Telegram does not know: 401 Unauthorized; a chat it does not know: 400 Bad Request: chat
not found; an owner who blocked the bot: 403 Forbidden: bot was blocked by the user), through
the real python-telegram-bot sender and the real door: each is named in the door's status with
what to do, logged once however often it is retried, retried at the backoff cap (never
hammered), and nothing is lost: once the refusal is lifted and the clock allows, the entry
rings, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from chief.phone.pacing import BACKOFF_MAX_S
from tests.support.door import BOT_TOKEN, DoorStack, body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

# Past the backoff cap, and any jitter on it (at most 20 %).
PAST_THE_CAP = timedelta(seconds=BACKOFF_MAX_S * 1.25)

REFUSALS = [
    # (emulator fault, the methods it answers, the kind named, words of Telegram's answer, remedy)
    # A bad token: Telegram refuses every method, getMe (the sender's first call) included.
    ("unauthorized", ["getMe", "sendMessage"], "bad_token", "401 Unauthorized", "BOT_TOKEN"),
    ("chat_not_found", ["sendMessage"], "chat_not_found", "chat not found", "TELEGRAM_CHAT_ID"),
    ("bot_blocked", ["sendMessage"], "bot_blocked", "bot was blocked by the user", "unblock"),
]


class Clock:
    """The door's wall clock: now, plus whatever the test moved it by."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def queue_of(stack: DoorStack) -> dict[str, Any]:
    answer = await stack.status()
    assert answer.status_code == 200, answer.text
    queue: dict[str, Any] = answer.json()["telegram_queue"]
    return queue


def sends(stack: DoorStack) -> int:
    """Bot API calls so far (with a bad token, a send stops at its getMe)."""
    return stack.emulator.calls["sendmessage"] + stack.emulator.calls["getme"]


async def try_again(stack: DoorStack, clock: Clock, calls_before: int) -> float:
    """Move the door's clock past the head's next attempt and wake the sender; wait for the
    try. Answers the door's time just before the try."""
    clock.offset += PAST_THE_CAP
    tried_after = clock().timestamp()
    assert stack.service.ringer is not None
    stack.service.ringer.nudge()
    await wait_until(lambda: sends(stack) > calls_before, what="the sender to try again")
    return tried_after


async def next_attempt_at(stack: DoorStack, *, attempts: int) -> float:
    """The head's next try (door time) once it has failed `attempts` times."""
    assert stack.chief is not None
    chief = stack.chief

    async def deferred() -> float | None:
        (head,) = await chief.store.telegram_head(1)
        return head.next_attempt_at if head.attempts >= attempts else None

    found: float = await wait_until(deferred, what=f"failed try {attempts} to be recorded")
    return found


@pytest.mark.parametrize(("mode", "methods", "kind", "answer", "remedy"), REFUSALS)
async def test_a_permanent_refusal_is_named_logged_once_retried_at_the_cap_and_loses_nothing(
    tmp_path: Path, mode: str, methods: list[str], kind: str, answer: str, remedy: str
) -> None:
    clock = Clock()
    fault = {"mode": mode, "count": 1000, "methods": methods}
    with capture_logs() as logs:
        async with door_stack(tmp_path, faults=[fault], wall_clock=clock) as stack:
            tried_after = clock().timestamp()
            response = await stack.notify(body("refused-1", text="todo #1 done: refused"))
            assert response.status_code == 200, response.text
            assert response.json()["telegram"] == "queued"
            assert await stack.chief_lines("refused-1") == 1  # the Chief is never held back

            async def refused() -> dict[str, Any] | None:
                queue = await queue_of(stack)
                return queue if queue["refusal"] is not None else None

            queue = await wait_until(refused, timeout_s=10, what="the refusal in the status")
            assert queue["refusal"]["kind"] == kind
            assert answer in queue["refusal"]["answer"]
            assert remedy in queue["refusal"]["action"]
            assert remedy in queue["last_error"]
            assert queue["depth"] == 1
            # Retried at the cap, not on the short backoff of a passing failure.
            assert await next_attempt_at(stack, attempts=1) - tried_after >= BACKOFF_MAX_S

            # Tried again (the clock moved past the cap): refused again, still at the cap, and
            # still one log line for the refusal.
            tried_after = await try_again(stack, clock, sends(stack))
            assert await next_attempt_at(stack, attempts=2) - tried_after >= BACKOFF_MAX_S
            assert (await queue_of(stack))["refusal"]["kind"] == kind

            # Lifted: the next try (the clock allows) rings the entry, once.
            stack.emulator.faults.clear()
            await try_again(stack, clock, sends(stack))

            async def rung() -> bool:
                assert stack.chief is not None
                return await stack.chief.sent_count() == 1

            await wait_until(rung, timeout_s=10, what="the entry to ring")
            assert stack.emulator.texts() == ["todo #1 done: refused"]
            queue = await queue_of(stack)
            assert queue["refusal"] is None
            assert queue["last_error"] is None
            assert queue["depth"] == 0
    refusals = [entry for entry in logs if entry["event"] == "door.telegram_refused"]
    assert len(refusals) == 1, refusals
    assert refusals[0]["kind"] == kind
    assert remedy in refusals[0]["action"]
    assert not [entry for entry in logs if entry["event"] == "door.send_failed"]
    # The bot token is a secret: no status answer or log line carries it.
    assert not [entry for entry in logs if BOT_TOKEN in repr(entry)]


async def test_the_emulator_answers_each_refusal_as_the_bot_api_does(tmp_path: Path) -> None:
    async with door_stack(tmp_path, telegram=False) as stack:
        base = stack.emulator_url
        expected = {
            "unauthorized": (401, "Unauthorized"),
            "chat_not_found": (400, "Bad Request: chat not found"),
            "bot_blocked": (403, "Forbidden: bot was blocked by the user"),
        }
        async with httpx.AsyncClient(timeout=10) as client:
            for mode, (status, description) in expected.items():
                armed = await client.post(base + "/emulator/faults", json={"mode": mode})
                assert armed.status_code == 200, armed.text
                answer = await client.post(
                    f"{base}/bot{BOT_TOKEN}/sendMessage", data={"chat_id": "1", "text": "x"}
                )
                assert answer.status_code == status
                assert answer.json() == {
                    "ok": False,
                    "error_code": status,
                    "description": description,
                }
        assert stack.emulator.messages == []
