"""Batches from the notifier (issue 14): the due head run goes to the door's batch route in one
POST and every outcome is recorded in one transaction; FIFO holds; a door without the route is
served one row per POST; a recording that fails part-way records no row and the retry delivers
each row once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from engine import direct
from engine import store as engine_store
from notifier.client import FakeDoorClient, HttpDoorClient
from notifier.config import NotifierConfig
from notifier.delivery import Database, OutboxRow
from notifier.errors import StoreError
from notifier.outcome import DoorReply
from notifier.worker import DrainOutcome, Worker
from plumbing.faults import FAULTS_ENV
from tests.integration.notifier.notifier_helpers import (
    add_rows,
    drain_once,
    lock_row,
    make_config,
    sent_ids,
)
from tests.support.door import KEY, door_stack
from tests.support.loopback_door import TestDoor, bound_socket, serve_door
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

NOTIFY_PATH = "/api/coop/engine/notify"


def _worker(config: NotifierConfig, client: object | None = None) -> Worker:
    return Worker(
        config,
        db=Database(lambda: engine_store.open_connection(config.db_path)),
        client_factory=(lambda: client)  # type: ignore[arg-type,return-value]
        if client is not None
        else lambda: HttpDoorClient(
            str(config.door_socket), config.service_key, config.client_timeout_s
        ),
    )


def _rows(db_path: Path) -> list[dict[str, object]]:
    with direct.connection(db_path) as conn:
        return [
            dict(r)
            for r in conn.execute(
                "SELECT id, state, attempts, door_answer, delivery_key FROM coop_outbox ORDER BY id"
            )
        ]


def _door_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "door"
    folder.mkdir(exist_ok=True)
    return folder


def _keys(db_path: Path) -> list[str]:
    """Every row's delivery key, in id order: what the door knows each row by."""
    return [str(r["delivery_key"]) for r in _rows(db_path)]


def _real_door_config(db_path: Path, socket_path: str, batch_max: int = 8) -> NotifierConfig:
    config = make_config(db_path, socket_path)
    return NotifierConfig(
        db_path=db_path,
        door_socket=config.door_socket,
        service_key=KEY,
        client_timeout_s=config.client_timeout_s,
        backoff_base_s=config.backoff_base_s,
        backoff_max_s=config.backoff_max_s,
        backstop_s=config.backstop_s,
        batch_max=batch_max,
    )


async def test_batches_reach_the_real_door_in_fifo_order_and_land_once(
    db_path: Path, tmp_path: Path
) -> None:
    ids = add_rows(db_path, 19)  # two full batches of 8 and one of 3
    async with door_stack(_door_folder(tmp_path), on_socket=True) as stack:
        worker = _worker(_real_door_config(db_path, stack.socket_path))
        report, logs = await drain_once(worker)
        assert report.outcome is DrainOutcome.RELEASED
        assert (report.delivered, report.deferred) == (19, 0)
        assert not [e for e in logs if e["event"] == "notifier.batch.unsupported"]
        rows = _rows(db_path)
        assert [(r["id"], r["state"], r["attempts"]) for r in rows] == [
            (i, "delivered", 1) for i in ids
        ]
        answer = json.loads(str(rows[0]["door_answer"]))
        assert (answer["delivered"], answer["outbox_id"]) == (True, rows[0]["delivery_key"])
        assert stack.chief is not None
        lines = [m.content for m in await stack.chief.recent_messages(50)]
        assert lines == [f"row {n}" for n in range(19)]
        for key in _keys(db_path):
            assert await stack.chief_lines(key) == 1
    assert lock_row(db_path) is None


async def test_a_door_without_the_batch_route_is_served_one_row_a_post_said_once(
    db_path: Path,
) -> None:
    door = TestDoor()  # the single route only: the batch route answers 404
    first = add_rows(db_path, 6)
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            worker = _worker(make_config(db_path, socket_path))
            try:
                with capture_logs() as logs:
                    assert (await worker.drain()).outcome is DrainOutcome.RELEASED
                    second = add_rows(db_path, 6, prefix="later")
                    assert (await worker.drain()).outcome is DrainOutcome.RELEASED
            finally:
                await worker.aclose()
                await worker.db.aclose()
    assert door.ids(db_path) == first + second  # each once, in order, on the single route
    assert door.resent(db_path) == {}
    assert [r["state"] for r in _rows(db_path)] == ["delivered"] * 12
    # The 404 is remembered for the process: asked once, said once.
    unsupported = [e for e in logs if e["event"] == "notifier.batch.unsupported"]
    assert len(unsupported) == 1
    assert unsupported[0]["url"].endswith(NOTIFY_PATH + "-batch")


async def test_a_batch_whose_recording_fails_part_way_records_no_row_and_the_retry_delivers_once(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_rows(db_path, 5)
    full = tmp_path / "disk-full"
    full.touch()
    # The store fails between the batch's first and second row marks.
    monkeypatch.setenv(FAULTS_ENV, f"engine.queue.record_batch.between_rows:raise-while={full}")
    async with door_stack(_door_folder(tmp_path), on_socket=True) as stack:
        config = _real_door_config(db_path, stack.socket_path)
        worker = _worker(config)
        try:
            with pytest.raises(StoreError):
                await worker.drain()
            # No row half-recorded: the first row's mark was rolled back with the rest.
            assert [(r["state"], r["attempts"]) for r in _rows(db_path)] == [("pending", 0)] * 5
            assert lock_row(db_path) is None  # the failed drain gave the lock back
            for key in _keys(db_path):  # the door accepted the whole batch once
                assert await stack.chief_lines(key) == 1
            full.unlink()
            report = await worker.drain()
        finally:
            await worker.aclose()
            await worker.db.aclose()
        assert (report.outcome, report.delivered) == (DrainOutcome.RELEASED, 5)
        rows = _rows(db_path)
        assert [(r["state"], r["attempts"]) for r in rows] == [("delivered", 1)] * 5
        for row in rows:  # the retry was a repeat the door knew
            assert json.loads(str(row["door_answer"]))["already_sent"] is True
        for key in _keys(db_path):
            assert await stack.chief_lines(key) == 1

        async def rung_once() -> bool:
            texts = stack.emulator.texts()
            return all(
                sum(t.count(f"row {n}\n") + t.endswith(f"row {n}") for t in texts) == 1
                for n in range(5)
            )

        await wait_until(rung_once, timeout_s=10, what="each row rung once")


def _answers(rows: list[OutboxRow], refused: set[int]) -> DoorReply:
    items = []
    for row in rows:
        if row.id in refused:
            items.append({"delivered": False, "outbox_id": row.delivery_key})
        else:
            items.append({"delivered": True, "outbox_id": row.delivery_key})
    return DoorReply(status=200, body=json.dumps({"items": items}).encode())


async def test_a_row_the_door_does_not_deliver_holds_the_rows_behind_it(db_path: Path) -> None:
    ids = add_rows(db_path, 6)
    client = FakeDoorClient(batch=lambda rows: _answers(rows, {ids[2]}))
    worker = _worker(make_config(db_path, backoff_base_s=60, backoff_max_s=60), client)
    try:
        report = await worker.drain()
    finally:
        await worker.db.aclose()
    assert (report.outcome, report.delivered, report.deferred) == (DrainOutcome.RELEASED, 2, 1)
    assert [sent_ids(db_path, b) for b in client.batches] == [ids]
    assert [(r["state"], r["attempts"]) for r in _rows(db_path)] == [
        ("delivered", 1),
        ("delivered", 1),
        ("pending", 1),  # deferred: the head now, not due for a minute
        ("pending", 0),  # untouched: FIFO holds them behind it
        ("pending", 0),
        ("pending", 0),
    ]


async def test_a_batch_request_that_fails_whole_defers_the_head_alone(db_path: Path) -> None:
    add_rows(db_path, 4)
    client = FakeDoorClient(
        batch=lambda rows: DoorReply(
            status=503, body=b'{"detail":"chief_unavailable"}', retry_after="120"
        )
    )
    worker = _worker(make_config(db_path), client)
    try:
        report = await worker.drain()
    finally:
        await worker.db.aclose()
    assert (report.delivered, report.deferred) == (0, 1)
    assert [r["attempts"] for r in _rows(db_path)] == [1, 0, 0, 0]
    assert client.sent == []  # a 503 is not a missing route: no fallback


async def test_batch_max_one_keeps_the_single_route(db_path: Path) -> None:
    ids = add_rows(db_path, 3)
    config = make_config(db_path)
    config = NotifierConfig(
        db_path=db_path, door_socket=config.door_socket, service_key=config.service_key, batch_max=1
    )
    client = FakeDoorClient(batch=lambda rows: _answers(rows, set()))
    worker = _worker(config, client)
    try:
        await worker.drain()
    finally:
        await worker.db.aclose()
    assert client.batches == []
    assert sent_ids(db_path, client.sent) == ids


async def test_a_batch_post_logs_one_delivery_event_naming_every_row(db_path: Path) -> None:
    # One event per POST, not per row: a structlog event costs ~65 us of the engine's CPU,
    # more than the rest of a row's delivery in a batch of 64; the event names every row.
    door = TestDoor(batch_route=True)
    ids = add_rows(db_path, 19)
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            config = make_config(db_path, socket_path)
            worker = _worker(config)
            try:
                with capture_logs() as logs:
                    assert (await worker.drain()).outcome is DrainOutcome.RELEASED
            finally:
                await worker.aclose()
                await worker.db.aclose()
    assert config.batch_max == 64
    delivered = [e for e in logs if e["event"] == "outbox.delivered"]
    assert [(e["outbox_ids"], e["attempts"], e["batch"]) for e in delivered] == [
        (ids, [1] * 19, 19)
    ]


async def test_a_door_taking_smaller_batches_is_served_at_its_limit_said_once(
    db_path: Path, tmp_path: Path
) -> None:
    # The door's CHIEF_NOTIFY_BATCH_MAX below the notifier's COOP_BATCH_MAX: the door answers
    # 422 naming its limit; the notifier sends batches of that size from then on, at once,
    # instead of deferring the head row for ever.
    ids = add_rows(db_path, 20)
    settings = {"CHIEF_NOTIFY_BATCH_MAX": "8"}
    async with door_stack(_door_folder(tmp_path), settings=settings, on_socket=True) as stack:
        worker = _worker(_real_door_config(db_path, stack.socket_path, batch_max=64))
        try:
            with capture_logs() as logs:
                report = await worker.drain()
                assert (report.outcome, report.delivered, report.deferred) == (
                    DrainOutcome.RELEASED,
                    20,
                    0,
                )
                more = add_rows(db_path, 9, prefix="later")
                assert (await worker.drain()).delivered == 9
        finally:
            await worker.aclose()
            await worker.db.aclose()
        for key in _keys(db_path):
            assert await stack.chief_lines(key) == 1
    assert [(r["state"], r["attempts"]) for r in _rows(db_path)] == [("delivered", 1)] * 29
    limited = [e for e in logs if e["event"] == "notifier.batch.limited"]
    assert [(e["rows"], e["was"]) for e in limited] == [(8, 64)]
    posts = [
        e.get("outbox_ids", [e.get("outbox_id")]) for e in logs if e["event"] == "outbox.delivered"
    ]
    assert posts == [ids[:8], ids[8:16], ids[16:], more[:8], more[8:]]
