"""The door mounted in a host app whose chat turn holds the Chief: the bounded report wait,
the retry storm that once rang the owner's phone once per retry, and the per-row lock table."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from tests.support.door import DoorStack, body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

CLIENT_TIMEOUT_S = 1.0
TURN_HELD_S = 6.0  # several times the client timeout, and three times the door's report wait
FIRST_WAVE = 10
RETRIES = 5


def finished(logs: list[dict[str, object]], outbox_id: str) -> int:
    """Notify handlers for `outbox_id` that reached an answer (delivered or already sent)."""
    return sum(
        1
        for entry in logs
        if entry["event"] in {"door.delivered", "door.already_sent"}
        and entry.get("delivery_key") == outbox_id
    )


async def test_door_report_wait_is_bounded_while_a_turn_is_held(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        async with stack.chief.turn():
            response = await stack.notify(body("7"))
            assert response.status_code == 200
            # The Chief is busy: the line waits in its outbox, Telegram is not held back.
            assert response.json()["chief_message_id"] is None
            await wait_until(lambda: stack.emulator.texts(), timeout_s=5, what="the ring")
            assert stack.emulator.texts() == [body("7")["text"]]
            assert await stack.chief_lines("7") == 0
            assert await stack.chief.undelivered_count() == 1
        await wait_until(lambda: stack.chief_lines("7"), timeout_s=10, what="the line to land")
        again = await stack.notify(body("7"))
        assert again.json()["already_sent"] is True
        assert isinstance(again.json()["chief_message_id"], int)
        assert len(stack.emulator.messages) == 1


async def test_door_retry_storm_rings_once(tmp_path: Path) -> None:
    outbox_id = "storm-1"
    document = body(outbox_id, text="todo #41 done: the storm row")
    async with door_stack(tmp_path, client_timeout_s=CLIENT_TIMEOUT_S) as stack:
        assert stack.chief is not None
        outcomes: list[str] = []

        async def post() -> None:
            try:
                response = await stack.notify(document)
                outcomes.append(str(response.status_code))
            except httpx.TimeoutException:
                outcomes.append("timeout")

        async def caller(retries: int) -> None:
            # The engine's client: post, and on a timeout post the same row again.
            await post()
            for _ in range(retries):
                if outcomes[-1] == "timeout":
                    await post()

        with capture_logs() as logs:
            async with stack.chief.turn():
                held_since = time.monotonic()
                async with anyio.create_task_group() as callers:
                    for index in range(FIRST_WAVE):
                        callers.start_soon(caller, 1 if index < RETRIES else 0)
                assert outcomes.count("timeout") == FIRST_WAVE + RETRIES
                await wait_until(
                    lambda: finished(logs, outbox_id) == FIRST_WAVE + RETRIES,
                    timeout_s=10,
                    what="every handler to answer",
                )
                # While the turn is still held, the door holds nothing per retry: no request
                # is parked on the Chief and no row lock is left.
                assert stack.service.in_flight == 0
                assert stack.service.ringer is not None
                assert len(stack.service.ringer.locks) == 0
                assert await stack.chief_lines(outbox_id) == 0
                # The scenario: a long chat turn; holding it is the test, not a synchronisation.
                await anyio.sleep(max(0.0, TURN_HELD_S - (time.monotonic() - held_since)))
            await wait_until(lambda: stack.chief_lines(outbox_id), timeout_s=10, what="landing")

        assert stack.emulator.texts() == [document["text"]]
        assert await stack.chief_lines(outbox_id) == 1
        assert await stack.chief.sent_count() == 1
        rung = [e for e in logs if e["event"] == "door.rung"]
        assert [e["delivery_keys"] for e in rung] == [[outbox_id]]


async def test_door_burst_of_retries_rings_each_row_once(tmp_path: Path) -> None:
    rows = [f"burst-{n}" for n in range(12)]
    async with door_stack(tmp_path) as stack:
        ringer = stack.service.ringer
        assert ringer is not None

        async def post(outbox_id: str) -> None:
            response = await stack.notify(body(outbox_id, text=f"row <{outbox_id}>"))
            assert response.status_code == 200

        async with anyio.create_task_group() as posts:
            for _ in range(5):
                for outbox_id in rows:
                    posts.start_soon(post, outbox_id)
        assert stack.chief is not None
        await wait_until(lambda: _sent_count(stack), timeout_s=20, what="every row rung and marked")
        joined = "\n".join(stack.emulator.texts())
        for outbox_id in rows:
            assert joined.count(f"row <{outbox_id}>") == 1
            assert await stack.chief_lines(outbox_id) == 1
        assert len(ringer.locks) == 0


async def _sent_count(stack: DoorStack) -> bool:
    assert stack.chief is not None
    return await stack.chief.sent_count() == 12


async def test_door_without_telegram_lands_every_report_and_answers_200(tmp_path: Path) -> None:
    async with door_stack(tmp_path, telegram=False) as stack:
        for outbox_id in ("9", "10", "11"):
            response = await stack.notify(body(outbox_id, text=f"chief only {outbox_id}"))
            assert response.status_code == 200, response.text
            assert response.json()["telegram"] == "not_configured"
            assert await stack.chief_lines(outbox_id) == 1
        # A notify with no outbox id has only Telegram to carry it: that one cannot be queued.
        alone = await stack.notify(body(None))
        assert (alone.status_code, alone.json()) == (
            503,
            {"detail": "notification_channel_unavailable"},
        )
        status = (await stack.status()).json()
        assert status["telegram_configured"] is False
        assert status["telegram_queue"]["depth"] == 0


async def test_door_ipv6_status(tmp_path: Path) -> None:
    async with door_stack(tmp_path, host="::1") as stack:
        response = await stack.status()
        assert response.status_code == 200
        assert response.json()["sent_count"] == 0
