"""The door mounted in a host app whose chat turn holds the Chief: the bounded report wait,
the retry storm that once rang the owner's phone once per retry, and the per-row lock table."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from tests.integration.door.door_env import body, door_stack
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
        and entry.get("outbox_id") == outbox_id
    )


async def test_door_report_wait_is_bounded_while_a_turn_is_held(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        async with stack.chief.turn():
            response = await stack.notify(body("7"))
            assert response.status_code == 200
            # The Chief is busy: the line waits in its outbox, Telegram is not held back.
            assert response.json()["chief_message_id"] is None
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
                assert len(stack.service.locks) == 0
                assert await stack.chief_lines(outbox_id) == 0
                # The scenario: a long chat turn; holding it is the test, not a synchronisation.
                await anyio.sleep(max(0.0, TURN_HELD_S - (time.monotonic() - held_since)))
            await wait_until(lambda: stack.chief_lines(outbox_id), timeout_s=10, what="landing")

        assert stack.emulator.texts() == [document["text"]]
        assert await stack.chief_lines(outbox_id) == 1
        assert await stack.chief.sent_count() == 1
        events = [e["event"] for e in logs if e.get("outbox_id") == outbox_id]
        assert events.count("door.delivered") == 1
        assert events.count("door.already_sent") == FIRST_WAVE + RETRIES - 1
        assert len(stack.service.locks) == 0


async def test_door_row_lock_table_empties_after_a_burst(tmp_path: Path) -> None:
    rows = [f"burst-{n}" for n in range(12)]
    async with door_stack(tmp_path) as stack:
        high_water = 0

        async def post(outbox_id: str) -> None:
            nonlocal high_water
            high_water = max(high_water, len(stack.service.locks))
            response = await stack.notify(body(outbox_id, text=f"row {outbox_id}"))
            assert response.status_code == 200

        async with anyio.create_task_group() as posts:
            for _ in range(5):
                for outbox_id in rows:
                    posts.start_soon(post, outbox_id)
        assert len(stack.service.locks) == 0
        assert high_water <= len(rows)
        assert sorted(stack.emulator.texts()) == sorted(f"row {r}" for r in rows)
        assert stack.chief is not None
        assert await stack.chief.sent_count() == len(rows)
        for outbox_id in rows:
            assert await stack.chief_lines(outbox_id) == 1


async def test_door_without_telegram_answers_503_after_the_chief_line(tmp_path: Path) -> None:
    async with door_stack(tmp_path, telegram=False) as stack:
        response = await stack.notify(body("9"))
        assert (response.status_code, response.json()) == (
            503,
            {"detail": "notification_channel_unavailable"},
        )
        assert "Retry-After" not in response.headers
        assert await stack.chief_lines("9") == 1
        assert (await stack.status()).json()["telegram_configured"] is False


async def test_door_ipv6_status(tmp_path: Path) -> None:
    async with door_stack(tmp_path, host="::1") as stack:
        response = await stack.status()
        assert response.status_code == 200
        assert response.json()["sent_count"] == 0
