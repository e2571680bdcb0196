"""The door's Telegram queue over real HTTP and the real sender: a lone row rings alone at once,
rows that pile up during a refusal go out as one digest in order, quiet hours ring silently,
and the emulator's flood control answers as Telegram does."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from chief.telegram.emulator import FloodLimits
from tests.support.door import body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


async def test_a_lone_row_on_a_quiet_system_rings_alone_at_once(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        response = await stack.notify(body("lone", text="todo #7 done: alone"))
        answer = response.json()
        assert answer["telegram"] == "sent"
        (message,) = stack.emulator.messages
        assert answer["telegram_message_id"] == message["message_id"]
        assert message["text"] == "todo #7 done: alone"  # no digest header


async def test_rows_piled_up_during_a_refusal_ring_as_one_digest_in_order(
    tmp_path: Path,
) -> None:
    texts = [f"todo #{n} done: <row {n}>" for n in range(1, 6)]
    faults = [{"mode": "429", "retry_after": 1, "count": 1}]
    async with door_stack(tmp_path, faults=faults) as stack:
        assert stack.chief is not None
        for n, text in enumerate(texts, start=1):
            response = await stack.notify(body(f"pile-{n}", text=text))
            assert response.status_code == 200
            assert await stack.chief_lines(f"pile-{n}") == 1  # the Chief is never held back

        async def all_sent() -> bool:
            assert stack.chief is not None
            return await stack.chief.sent_count() == len(texts)

        await wait_until(all_sent, timeout_s=15, what="every row rung")
        assert stack.emulator.texts() == ["5 updates\n\n" + "\n\n".join(texts)]
        # Every carried row is marked with the digest's id: a retry of any of them rings nothing.
        (digest,) = stack.emulator.messages
        for n in range(1, 6):
            again = (await stack.notify(body(f"pile-{n}", text=texts[n - 1]))).json()
            assert again["already_sent"] is True
            assert again["telegram_message_id"] == digest["message_id"]
        assert len(stack.emulator.messages) == 1


async def test_quiet_hours_ring_silently_and_only_inside_the_window(tmp_path: Path) -> None:
    clock = [datetime(2026, 1, 15, 3, 0, tzinfo=UTC)]
    settings = {"TELEGRAM_QUIET_HOURS": "22:00-07:00", "TELEGRAM_QUIET_TZ": "UTC"}
    async with door_stack(tmp_path, settings=settings, wall_clock=lambda: clock[0]) as stack:
        night = await stack.notify(body("night", text="todo #8 done at 3 a.m."))
        assert night.json()["telegram"] == "sent"
        clock[0] = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
        noon = await stack.notify(body("noon", text="todo #9 done at noon"))
        assert noon.json()["telegram"] == "sent"
        assert [(m["text"], m["disable_notification"]) for m in stack.emulator.messages] == [
            ("todo #8 done at 3 a.m.", True),
            ("todo #9 done at noon", False),
        ]
        assert await stack.chief_lines("night") == 1
        assert await stack.chief_lines("noon") == 1


def test_emulator_flood_limits_answer_like_telegram() -> None:
    flood = FloodLimits()
    assert [flood.admit(4242) for _ in range(3)] == [None, None, None]  # the burst
    assert flood.admit(4242) == 1  # then about one a second
    assert [flood.admit(-100) for _ in range(3)] == [None, None, None]
    assert flood.admit(-100) == 3  # a group: 20 per minute
    assert flood.admit(7) is None  # another chat has its own bucket
