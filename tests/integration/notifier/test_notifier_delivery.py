"""Delivering rows to a real loopback door over HTTP: FIFO, deferral, backoff, Retry-After."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from engine import outbox
from engine import store as engine_store
from notifier import waiter as waiter_module
from notifier.client import HttpDoorClient
from notifier.config import NotifierConfig
from notifier.daemon import Daemon
from notifier.delivery import Database, open_own_connection
from notifier.errors import StoreError
from notifier.waiter import Waiter
from notifier.worker import DrainOutcome, Worker
from tests.integration.notifier.notifier_helpers import (
    add_rows,
    lock_row,
    make_config,
    outbox_row,
    states,
)
from tests.support.loopback_door import (
    Answer,
    TestDoor,
    bound_socket,
    door_socket,
    serve_door,
)
from tests.support.waiting import wait_until


def _worker(config: NotifierConfig) -> Worker:
    return Worker(
        config,
        db=Database(lambda: engine_store.open_connection(config.db_path)),
        client_factory=lambda: HttpDoorClient(
            str(config.door_socket), config.service_key, config.client_timeout_s
        ),
    )


async def _drain_once(config: NotifierConfig) -> DrainOutcome:
    worker = _worker(config)
    try:
        return (await worker.drain()).outcome
    finally:
        await worker.aclose()
        await worker.db.aclose()


async def test_rows_reach_the_door_in_fifo_order_with_the_key_and_the_answer_is_recorded(
    db_path: Path,
) -> None:
    door = TestDoor()
    ids = add_rows(db_path, 5)
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            with capture_logs() as logs:
                assert await _drain_once(make_config(db_path, socket_path)) is DrainOutcome.RELEASED
    assert door.ids(db_path) == ids
    assert door.wrong_keys == 0
    first = outbox_row(db_path, ids[0])
    key = first["delivery_key"]  # the row's delivery key, never its id
    assert door.received[0] == {"text": "row 0", "kind": "note", "outbox_id": key}
    assert first["state"] == "delivered"
    assert first["attempts"] == 1
    assert json.loads(str(first["door_answer"])) == {"delivered": True, "outbox_id": key}
    assert lock_row(db_path) is None
    delivered = [e for e in logs if e["event"] == "outbox.delivered"]
    assert [(e["outbox_id"], e["attempt"]) for e in delivered] == [(i, 1) for i in ids]


async def test_door_down_is_looked_at_on_a_short_interval_without_a_write_then_up_delivers_all(
    db_path: Path,
) -> None:
    # Nothing listens (the socket refuses connections): the head is tried once, then the socket
    # is looked at every COOP_UNREACHABLE_RETRY_S (no backoff to grow, no try written), and the
    # outage is logged once, not per look.
    door = TestDoor()
    ids = add_rows(db_path, 5)
    with bound_socket(db_path.parent / "door.sock") as sock:  # bound, not listening: refused
        config = make_config(
            db_path,
            door_socket(sock),
            backoff_base_s=5.0,
            backoff_max_s=60.0,
            unreachable_retry_s=0.05,
        )
        daemon = Daemon(config)
        with capture_logs() as logs:
            async with anyio.create_task_group() as tg:
                tg.start_soon(daemon.run)
                await wait_until(
                    lambda: outbox_row(db_path, ids[0])["attempts"] >= 1, what="a refused try"
                )
                # What is asserted is that nothing happens: let twenty retry intervals pass.
                await anyio.sleep(20 * config.unreachable_retry_s)
                # Strict FIFO: the deferred head holds every row behind it; tried once only.
                assert [outbox_row(db_path, i)["attempts"] for i in ids] == [1, 0, 0, 0, 0]
                head = outbox_row(db_path, ids[0])
                assert "the door is not running" in str(head["last_error"])
                attempted = engine_store.parse_iso(str(head["last_attempt_at"])).timestamp()
                assert float(head["next_attempt_at"]) - attempted <= 0.05 + 0.01  # not 5 s on
                async with serve_door(door, sock):
                    await wait_until(
                        lambda: set(states(db_path).values()) == {"delivered"},
                        what="every row delivered",
                    )
                daemon.stop()
    assert door.ids(db_path) == ids
    assert [e for e in logs if e["event"] == "outbox.deferred"] == []
    [down] = [e for e in logs if e["event"] == "notifier.door.unreachable"]
    assert (down["outbox_id"], down["tries"]) == (ids[0], 1)
    [back] = [e for e in logs if e["event"] == "notifier.door.reachable"]
    assert back["tries"] >= 3  # the refused try and the looks since
    assert outbox_row(db_path, ids[0])["attempts"] == 2
    assert lock_row(db_path) is None


async def test_a_one_shot_drainer_waits_out_a_short_outage_then_leaves_a_long_one(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each refused connection defers the head by a moment only: the one-shot drainer keeps
    # looking at the socket (nothing written) while the outage is younger than its wait bound,
    # then leaves the row to the daemon or the retry timer, as it leaves a long deferral; no
    # line per look.
    monkeypatch.setattr(waiter_module, "DRAIN_WAIT_MAX_S", 1.0)
    [row] = add_rows(db_path, 1)
    with bound_socket(db_path.parent / "door.sock") as sock:  # bound, not listening: refused
        config = make_config(db_path, door_socket(sock), unreachable_retry_s=0.05)
        worker = _worker(config)
        try:
            with capture_logs() as logs:
                assert (await worker.drain()).deferred == 1
                waiter = Waiter(worker, worker.db, db_path, anyio.Event(), time.time)
                with anyio.fail_after(10):
                    await waiter.run()
        finally:
            await worker.aclose()
            await worker.db.aclose()
    assert worker.unreachable_s > 1.0
    assert int(str(outbox_row(db_path, row)["attempts"])) == 1  # looked at since, not tried
    events = [e["event"] for e in logs]
    assert "notifier.drain.waiting" not in events
    assert events.count("notifier.door.unreachable") == 1
    assert events[-1] == "notifier.drain.left_deferred"


async def test_refused_tries_do_not_grow_the_backoff_of_the_next_real_failure(
    db_path: Path,
) -> None:
    # Six refused connections, then the door answers 503: the row counts 7 attempts, but its
    # backoff is its first real failure's (5-10 s), not the sixth doubling's (the 60 s cap).
    [row] = add_rows(db_path, 1)
    now = [time.time()]
    with bound_socket(db_path.parent / "door.sock") as sock:  # bound, not listening: refused
        config = make_config(
            db_path,
            door_socket(sock),
            backoff_base_s=10.0,
            backoff_max_s=60.0,
            unreachable_retry_s=1,
        )
        worker = Worker(
            config,
            db=Database(lambda: engine_store.open_connection(db_path)),
            client_factory=lambda: HttpDoorClient(
                str(config.door_socket), config.service_key, config.client_timeout_s
            ),
            clock=lambda: now[0],
        )
        door = TestDoor(script=[Answer(503, body={"detail": "chief_unavailable"})])
        try:
            with capture_logs() as logs:
                for _ in range(6):
                    assert (await worker.drain()).deferred == 1
                    now[0] += 1.0  # the refused head is due again
                async with serve_door(door, sock):
                    assert (await worker.drain()).deferred == 1
        finally:
            await worker.aclose()
            await worker.db.aclose()
    assert outbox_row(db_path, row)["attempts"] == 7
    [deferred] = [e for e in logs if e["event"] == "outbox.deferred"]
    assert deferred["attempt"] == 7
    assert 5.0 <= deferred["retry_in_s"] <= 10.0
    assert deferred["error"] == "HTTP 503 Service Unavailable: chief_unavailable"


async def test_a_503_with_retry_after_3_is_honoured_and_an_operator_retry_makes_it_due(
    db_path: Path,
) -> None:
    door = TestDoor(
        script=[
            Answer(503, {"Retry-After": "3"}, body={"detail": "notification_channel_unavailable"})
        ]
    )
    first, second = add_rows(db_path, 2)
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            # The backoff caps at 0.2 s: the 3 s is the door's.
            config = make_config(db_path, socket_path)
            assert await _drain_once(config) is DrainOutcome.RELEASED
            row = outbox_row(db_path, first)
            assert row["state"] == "pending"
            assert row["attempts"] == 1
            assert "notification_channel_unavailable" in str(row["last_error"])
            assert "Retry-After 3" in str(row["last_error"])
            attempted = engine_store.parse_iso(str(row["last_attempt_at"])).timestamp()
            assert float(row["next_attempt_at"]) - attempted >= 3.0 - 0.01
            # A drain before the door's time sends nothing: the head is not due.
            assert await _drain_once(config) is DrainOutcome.RELEASED
            assert door.ids(db_path) == []
            outbox.retry(first, actor="operator", db=str(db_path))
            assert await _drain_once(config) is DrainOutcome.RELEASED
    assert door.ids(db_path) == [first, second]


async def test_other_statuses_a_malformed_answer_a_wrong_key_and_a_timeout_are_deferrals(
    db_path: Path,
) -> None:
    door = TestDoor(script=[Answer(500, body={"detail": "boom"}), Answer(200, raw=b"<html>")])
    (only,) = add_rows(db_path, 1)
    errors: list[str] = []
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            config = make_config(db_path, socket_path, client_timeout_s=0.3)
            for tweak in ("500", "malformed", "wrong key", "timeout"):
                if tweak == "wrong key":
                    await _drain_once(NotifierConfig(**{**config.__dict__, "service_key": "wrong"}))
                elif tweak == "timeout":
                    door.delay_s = 1.0
                    await _drain_once(config)
                    door.delay_s = 0.0
                else:
                    await _drain_once(config)
                row = outbox_row(db_path, only)
                assert row["state"] == "pending"
                errors.append(str(row["last_error"]))
                outbox.retry(only, actor="operator", db=str(db_path))
            await _drain_once(config)
    assert errors[0] == "HTTP 500 Internal Server Error: boom"
    assert "malformed answer" in errors[1]
    assert errors[2] == "HTTP 401 Unauthorized: unauthorized"
    assert errors[3].startswith("timeout after 0.3s")
    row = outbox_row(db_path, only)
    assert row["state"] == "delivered"
    assert row["attempts"] == 5


async def test_a_database_that_cannot_be_opened_is_one_line_of_the_notifiers_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "coop.db"
    path.mkdir()  # a folder where the file should be
    db = Database(lambda: open_own_connection(path))
    try:
        with pytest.raises(StoreError) as caught:
            await db.call(lambda conn: conn.execute("SELECT 1"))
    finally:
        await db.aclose()
    said = str(caught.value)
    assert said.startswith("cannot open the Coop database"), said
    assert said.count("cannot open the Coop database") == 1, said  # never twice in the line
    assert str(path) in said, said
    assert "\n" not in said
