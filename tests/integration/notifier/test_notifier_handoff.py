"""The worker lock and the atomic idle handoff, on a real ledger file (the door is a double)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from engine import direct
from engine import store as engine_store
from notifier import delivery
from notifier.client import FakeDoorClient
from notifier.delivery import Database, IdleHandoff
from notifier.errors import LockLost
from notifier.holder import this_worker
from notifier.outcome import DoorReply
from notifier.worker import DrainOutcome, Worker, release_worker_if_idle
from tests.integration.notifier.notifier_helpers import (
    add_rows,
    lock_row,
    make_config,
    sent_ids,
    states,
)


def _worker(db_path: Path, door: FakeDoorClient, **kw: object) -> Worker:
    return Worker(
        make_config(db_path),
        db=Database(lambda: engine_store.open_connection(db_path)),
        client_factory=lambda: door,
        **kw,  # type: ignore[arg-type]
    )


def _claim(conn: sqlite3.Connection) -> str:
    me = this_worker("test")
    assert delivery.claim_lock(conn, me, engine_store.now_iso()).acquired
    return me.owner


def test_idle_handoff_releases_the_lock_when_nothing_is_queued(conn: sqlite3.Connection) -> None:
    owner = _claim(conn)
    assert delivery.release_worker_if_idle(conn, owner, time.time) is IdleHandoff.RELEASED
    assert delivery.lock_holder(conn) is None


def test_idle_handoff_keeps_the_lock_and_reports_work_when_a_row_is_queued(
    conn: sqlite3.Connection, db_path: Path
) -> None:
    owner = _claim(conn)
    add_rows(db_path, 1)
    assert delivery.release_worker_if_idle(conn, owner, time.time) is IdleHandoff.WORK_AVAILABLE
    holder = delivery.lock_holder(conn)
    assert holder is not None
    assert holder.owner == owner


def test_idle_handoff_treats_a_deferred_head_as_no_work_even_with_due_rows_behind_it(
    conn: sqlite3.Connection, db_path: Path
) -> None:
    first, _second = add_rows(db_path, 2)
    conn.execute(
        "UPDATE coop_outbox SET attempts = 1, next_attempt_at = ? WHERE id = ?",
        (time.time() + 60, first),
    )
    owner = _claim(conn)
    assert delivery.due_head(conn, time.time) is None
    assert delivery.release_worker_if_idle(conn, owner, time.time) is IdleHandoff.RELEASED


def test_idle_handoff_refuses_a_caller_that_no_longer_holds_the_lock(
    conn: sqlite3.Connection,
) -> None:
    owner = _claim(conn)
    conn.execute("DELETE FROM worker_lock")
    with pytest.raises(LockLost, match="no longer holds the worker lock"):
        delivery.release_worker_if_idle(conn, owner, time.time)


async def test_the_service_verb_runs_the_handoff_in_one_call(db_path: Path) -> None:
    db = Database(lambda: engine_store.open_connection(db_path))
    me = this_worker("test")
    try:
        assert (await db.call(delivery.claim_lock, me, engine_store.now_iso())).acquired
        outcome = await release_worker_if_idle(db, me.owner, time.time)
    finally:
        await db.aclose()
    assert outcome is IdleHandoff.RELEASED
    assert lock_row(db_path) is None


async def test_a_row_inserted_at_the_idle_seam_is_delivered_by_the_current_drain(
    db_path: Path,
) -> None:
    door = FakeDoorClient()
    inserted: list[int] = []

    async def producer_at_the_seam() -> None:
        # Between the drain's empty read and its handoff: exactly where the old two-step
        # release stranded a row whose producer's worker had lost the lock.
        if not inserted:
            inserted.extend(add_rows(db_path, 1, prefix="at the seam"))

    worker = _worker(db_path, door, idle_seam=producer_at_the_seam)
    with capture_logs() as logs:
        report = await worker.drain()
    await worker.aclose()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.RELEASED
    assert sent_ids(db_path, door.sent) == inserted
    assert states(db_path) == {inserted[0]: "delivered"}
    handoffs = [e["outcome"] for e in logs if e["event"] == "worker.handoff"]
    assert handoffs == ["work_available", "released"]
    assert lock_row(db_path) is None


async def test_a_bounded_drain_stops_after_its_count_and_releases_the_lock(
    db_path: Path,
) -> None:
    ids = add_rows(db_path, 5)
    door = FakeDoorClient()
    worker = _worker(db_path, door)
    with capture_logs() as logs:
        report = await worker.drain(max_runs=2)
    await worker.aclose()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.MAX_RUNS
    assert report.delivered == 2
    assert sent_ids(db_path, door.sent) == ids[:2]
    assert list(states(db_path).values()) == ["delivered"] * 2 + ["pending"] * 3
    assert lock_row(db_path) is None
    assert {"event": "worker.handoff", "outcome": "max_runs"}.items() <= next(
        e for e in logs if e["event"] == "worker.handoff"
    ).items()


async def test_a_drain_that_loses_the_lock_to_a_live_worker_delivers_nothing(
    conn: sqlite3.Connection, db_path: Path
) -> None:
    holder = _claim(conn)  # this live process holds it under another owner id
    add_rows(db_path, 3)
    door = FakeDoorClient()
    worker = _worker(db_path, door)
    report = await worker.drain()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.LOCK_BUSY
    assert report.holder is not None
    assert report.holder.owner == holder
    assert door.sent == []
    assert set(states(db_path).values()) == {"pending"}


async def test_a_deferred_head_holds_the_rows_behind_it_and_the_drain_releases(
    db_path: Path,
) -> None:
    ids = add_rows(db_path, 3)
    door = FakeDoorClient(lambda row: DoorReply(status=503, body=b'{"detail":"x"}'))
    worker = _worker(db_path, door)
    with capture_logs() as logs:
        report = await worker.drain()
    await worker.aclose()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.RELEASED
    assert report.deferred == 1
    assert sent_ids(db_path, door.sent) == ids[:1]
    released = [e for e in logs if e["event"] == "worker.handoff"][-1]
    assert released["outcome"] == "released"
    assert released["deferred_head"] == ids[0]
    assert lock_row(db_path) is None


class _CommitBeforeHandoff(Database):
    """The real database thread, with a producer's commit slipped in just before the handoff's
    transaction starts: after the worker's last look and whatever it sampled there, before its
    `BEGIN IMMEDIATE`. The window a stale clock sample used to leave open (seed 002)."""

    def __init__(self, db_path: Path, produce: object) -> None:
        super().__init__(lambda: engine_store.open_connection(db_path))
        self._produce = produce

    async def call(self, fn, *args):  # type: ignore[no-untyped-def, override]
        if fn is delivery.release_worker_if_idle:
            self._produce()  # type: ignore[operator]
        return await super().call(fn, *args)


@pytest.mark.parametrize("producer", ["fresh_row", "operator_retry"])
async def test_a_commit_between_the_last_look_and_the_handoff_is_work_available(
    db_path: Path, producer: str
) -> None:
    door = FakeDoorClient()
    made: list[int] = []
    deferred: list[int] = []
    if producer == "operator_retry":
        # A head deferred far ahead: the worker's last look finds nothing due.
        deferred.extend(add_rows(db_path, 1, prefix="deferred"))
        with direct.connection(db_path) as c:
            c.execute(
                "UPDATE coop_outbox SET attempts = 1, next_attempt_at = ? WHERE id = ?",
                (time.time() + 3600, deferred[0]),
            )

    def produce() -> None:
        if made:
            return
        if producer == "fresh_row":
            made.extend(add_rows(db_path, 1, prefix="between look and handoff"))
        else:
            from engine import outbox

            outbox.retry(deferred[0], actor="operator", db=str(db_path))
            made.append(deferred[0])

    worker = Worker(
        make_config(db_path),
        db=_CommitBeforeHandoff(db_path, produce),
        client_factory=lambda: door,
    )
    with capture_logs() as logs:
        report = await worker.drain()
    await worker.aclose()
    await worker.db.aclose()
    handoffs = [e["outcome"] for e in logs if e["event"] == "worker.handoff"]
    assert handoffs[0] == "work_available"
    assert report.outcome is DrainOutcome.RELEASED
    assert sent_ids(db_path, door.sent) == made
    assert states(db_path) == {made[0]: "delivered"}
    assert lock_row(db_path) is None


async def test_a_row_never_attempted_is_work_even_for_a_worker_whose_clock_lags(
    db_path: Path,
) -> None:
    # The worker's clock is behind the producer's (another process, a clock step): a row no
    # worker has tried yet is due whatever the clock says, so it is never stranded.
    door = FakeDoorClient()
    inserted: list[int] = []
    lagging = time.time() - 30.0

    async def producer_at_the_seam() -> None:
        if not inserted:
            inserted.extend(add_rows(db_path, 1, prefix="from a faster clock"))

    worker = _worker(db_path, door, idle_seam=producer_at_the_seam, clock=lambda: lagging)
    report = await worker.drain()
    await worker.aclose()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.RELEASED
    assert sent_ids(db_path, door.sent) == inserted
    assert lock_row(db_path) is None
