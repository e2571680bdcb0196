"""The notify-batch route over real HTTP (the door on uvicorn, a real Chief on a real chief.db,
python-telegram-bot against the emulator): one answer per row in order, each what the single
route answers for that row; a whole batch retried in a storm (concurrent and sequential repeats,
overlapping batches) rings each row at most once and lands it once; a batch whose transaction
fails part-way records no row, and its retry delivers each row once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import httpx
import pytest
from structlog.testing import capture_logs

from plumbing.faults import FAULTS_ENV
from tests.support.door import DoorStack, batch, body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

ANSWER_FIELDS = {"delivered", "channel", "outbox_id", "chief_message_id", "telegram"}


def rung(stack: DoorStack, text: str) -> int:
    """How many times `text` reached Telegram, alone or inside a digest."""
    return sum(message.count(text) for message in stack.emulator.texts())


def counts(folder: Path) -> dict[str, int]:
    """What chief.db holds, read with a second connection as an operator would."""
    tables = ("messages", "chief_report_outbox", "telegram_queue", "coop_notify_sent")
    with sqlite3.connect(folder / "chief.db") as conn:
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]) for t in tables}


async def sent_count(stack: DoorStack) -> int:
    assert stack.chief is not None
    return await stack.chief.sent_count()


async def test_door_batch_answers_each_row_in_order_as_the_single_route_would(
    tmp_path: Path,
) -> None:
    ids = [f"b-{n}" for n in range(8)]
    async with door_stack(tmp_path) as stack:
        single = await stack.notify(body("single-1", text="row <single-1>"))
        assert single.status_code == 200, single.text
        await wait_until(lambda: sent_count(stack), timeout_s=10, what="the single row's mark")

        response = await stack.notify_batch(batch(ids))
        assert response.status_code == 200, response.text
        answers = response.json()["items"]
        assert [answer["outbox_id"] for answer in answers] == ids
        for answer in answers:
            assert set(answer) >= ANSWER_FIELDS
            assert set(answer) == set(single.json()) | ({"telegram_message_id"} & set(answer))
            assert (answer["delivered"], answer["channel"]) == (True, "telegram")
            assert isinstance(answer["chief_message_id"], int)  # landed in the same hop
            assert answer["telegram"] in {"sent", "queued"}
            assert "already_sent" not in answer or answer["already_sent"] is False
        await wait_until(
            lambda: all(rung(stack, f"row <{n}>") == 1 for n in ids), timeout_s=10, what="rings"
        )

        # A row already rung answers exactly as the single route answers a repeat.
        await wait_until(lambda: _sent(stack, 9), timeout_s=10, what="every mark")
        again = await stack.notify_batch(batch(["single-1", *ids]))
        assert again.status_code == 200, again.text
        repeat_single = (await stack.notify(body("single-1", text="row <single-1>"))).json()
        assert again.json()["items"][0] == repeat_single
        for answer in again.json()["items"]:
            assert answer["already_sent"] is True
            assert answer["telegram"] == "sent"
            assert isinstance(answer["telegram_message_id"], int)
        for outbox_id in ["single-1", *ids]:
            assert rung(stack, f"row <{outbox_id}>") == 1
            assert await stack.chief_lines(outbox_id) == 1
        # The Chief holds them in the order they came.
        assert stack.chief is not None
        lines = [m.content for m in await stack.chief.recent_messages(50)]
        assert lines == [f"row <{n}>" for n in ["single-1", *ids]]


async def _sent(stack: DoorStack, expected: int) -> bool:
    return await sent_count(stack) == expected


async def test_door_batch_retry_storm_rings_each_row_at_most_once(tmp_path: Path) -> None:
    first = [f"storm-{n}" for n in range(8)]
    overlapping = [f"storm-{n}" for n in range(4, 12)]  # a retry re-batched differently
    every = sorted(set(first) | set(overlapping))
    async with door_stack(tmp_path, client_timeout_s=1.0) as stack:
        assert stack.chief is not None
        outcomes: list[str] = []

        async def post(document: object) -> None:
            try:
                response = await stack.notify_batch(document)
            except httpx.TimeoutException:
                outcomes.append("timeout")
                return
            assert response.status_code == 200, response.text
            outcomes.append("200")

        with capture_logs() as logs:
            # Concurrent repeats while a chat turn holds the Chief: every request waits its
            # bounded report wait, several past the client's timeout, and nothing lands yet.
            async with stack.chief.turn():
                async with anyio.create_task_group() as posts:
                    for _ in range(5):
                        posts.start_soon(post, batch(first))
                        posts.start_soon(post, batch(overlapping))
                assert len(outcomes) == 10
                for outbox_id in every:
                    assert await stack.chief_lines(outbox_id) == 0
            # Sequential repeats once the Chief is free, racing the rings and their marks.
            for _ in range(3):
                await post(batch(first))
                await post(batch(overlapping))
            await wait_until(lambda: _sent(stack, len(every)), timeout_s=15, what="every mark")
            for _ in range(2):
                await post(batch(overlapping))
                await post(batch(first))

        for outbox_id in every:
            assert rung(stack, f"row <{outbox_id}>") == 1, stack.emulator.texts()
            assert await stack.chief_lines(outbox_id) == 1
        carried = [row for e in logs if e["event"] == "door.rung" for row in e["delivery_keys"]]
        assert sorted(carried) == every
        assert counts(tmp_path)["telegram_queue"] == 0
        assert stack.service.in_flight == 0
        assert stack.service.ringer is not None
        assert len(stack.service.ringer.locks) == 0


async def test_door_batch_failing_part_way_records_no_row_and_its_retry_delivers_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = tmp_path / "disk-full"
    # Reached between two rows of a batch, inside its one transaction: row 0 is written.
    monkeypatch.setenv(FAULTS_ENV, f"chief.store.batch_next_row:raise-while={failing}")
    ids = [f"part-{n}" for n in range(6)]
    async with door_stack(tmp_path) as stack:
        before = await stack.notify(body("before", text="row <before>"))
        assert before.status_code == 200, before.text
        await wait_until(lambda: _sent(stack, 1), timeout_s=10, what="the first row's mark")
        recorded = counts(tmp_path)

        failing.touch()
        with capture_logs() as logs:
            response = await stack.notify_batch(batch(["before", *ids]))
        assert (response.status_code, response.json()) == (503, {"detail": "chief_unavailable"})
        assert [e["event"] for e in logs if e["log_level"] == "error"] == ["door.chief_failed"]
        # Nothing of the batch was kept, not even the rows before the failure.
        assert counts(tmp_path) == recorded
        assert stack.emulator.texts() == ["row <before>"]

        failing.unlink()
        retry = await stack.notify_batch(batch(["before", *ids]))
        assert retry.status_code == 200, retry.text
        assert [a["outbox_id"] for a in retry.json()["items"]] == ["before", *ids]
        assert retry.json()["items"][0]["already_sent"] is True
        await wait_until(lambda: _sent(stack, 7), timeout_s=10, what="every mark")
        for outbox_id in ["before", *ids]:
            assert rung(stack, f"row <{outbox_id}>") == 1
            assert await stack.chief_lines(outbox_id) == 1


async def test_door_batch_without_telegram_answers_not_configured_per_row(
    tmp_path: Path,
) -> None:
    async with door_stack(tmp_path, telegram=False) as stack:
        response = await stack.notify_batch(batch(["n-1", "n-2"]))
        assert response.status_code == 200, response.text
        assert [a["telegram"] for a in response.json()["items"]] == ["not_configured"] * 2
        for outbox_id in ("n-1", "n-2"):
            assert await stack.chief_lines(outbox_id) == 1


async def test_door_batch_logs_one_event_per_batch_with_every_row_id(tmp_path: Path) -> None:
    # One event per request, not per row: a structlog event costs ~65 us of the door's CPU,
    # as much as the rest of a row's work; the event still names every row.
    async with door_stack(tmp_path) as stack:
        with capture_logs() as logs:
            first = await stack.notify_batch(batch(["l-1", "l-2", "l-3"]))
            assert first.status_code == 200, first.text
            await wait_until(lambda: _sent(stack, 3), timeout_s=10, what="every mark")
            again = await stack.notify_batch(batch(["l-3", "l-4"]))
            assert again.status_code == 200, again.text
        events = [e for e in logs if e["event"] in {"door.delivered", "door.already_sent"}]
        assert [e["event"] for e in events] == ["door.delivered", "door.delivered"]
        assert [e["delivery_keys"] for e in events] == [["l-1", "l-2", "l-3"], ["l-3", "l-4"]]
        assert [e["already_sent"] for e in events] == [[], ["l-3"]]
        assert [e["batch"] for e in events] == [3, 2]
        assert events[1]["chief_message_ids"] == [
            answer["chief_message_id"] for answer in again.json()["items"]
        ]
        assert sum(events[1]["telegram"].values()) == 2
