"""Taking over the worker lock: only from a holder that is provably gone, never by a timer."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from engine import store as engine_store
from notifier import delivery
from notifier.client import FakeDoorClient
from notifier.delivery import Database
from notifier.holder import process_start_time, this_worker
from notifier.worker import DrainOutcome, Worker
from tests.integration.notifier.notifier_helpers import (
    add_rows,
    lock_row,
    make_config,
    sent_ids,
    states,
)

OLD = "2000-01-01T00:00:00.000Z"  # a lock this old is still not "dead" by age alone


def _plant_lock(
    conn: sqlite3.Connection, pid: int, started_at: float | None, host: str | None = None
) -> None:
    conn.execute(
        "INSERT INTO worker_lock (singleton, owner, pid, host, started_at, acquired_at)"
        " VALUES (1, ?, ?, ?, ?, ?)",
        (f"planted-{pid}", pid, host or socket.gethostname(), started_at, OLD),
    )


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    yield proc
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)


def _dead_pid() -> tuple[int, float | None]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    started = process_start_time(proc.pid)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)  # reaped: the pid names no process now
    return proc.pid, started


async def _drain(db_path: Path) -> tuple[Worker, FakeDoorClient]:
    door = FakeDoorClient()
    worker = Worker(
        make_config(db_path),
        db=Database(lambda: engine_store.open_connection(db_path)),
        client_factory=lambda: door,
    )
    return worker, door


async def test_a_dead_holders_lock_is_taken_over_with_a_log_naming_it(
    conn: sqlite3.Connection, db_path: Path
) -> None:
    pid, started = _dead_pid()
    _plant_lock(conn, pid, started)
    ids = add_rows(db_path, 2)
    worker, door = await _drain(db_path)
    with capture_logs() as logs:
        report = await worker.drain()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.RELEASED
    assert sent_ids(db_path, door.sent) == ids
    taken = [e for e in logs if e["event"] == "worker.lock.taken_over"]
    assert len(taken) == 1
    assert taken[0]["dead_owner"] == f"planted-{pid}"
    assert taken[0]["dead_pid"] == pid
    assert f"pid {pid} is not running" in taken[0]["reason"]
    assert lock_row(db_path) is None


async def test_a_live_holders_lock_is_not_taken_over_however_old(
    conn: sqlite3.Connection, db_path: Path, live_process: subprocess.Popen[bytes]
) -> None:
    _plant_lock(conn, live_process.pid, process_start_time(live_process.pid))
    add_rows(db_path, 1)
    worker, door = await _drain(db_path)
    report = await worker.drain()
    await worker.db.aclose()
    assert report.outcome is DrainOutcome.LOCK_BUSY
    assert door.sent == []
    assert set(states(db_path).values()) == {"pending"}
    found = lock_row(db_path)
    assert found is not None
    assert found["owner"] == f"planted-{live_process.pid}"


def test_a_reused_pid_is_a_different_process_and_its_lock_is_taken_over(
    conn: sqlite3.Connection, live_process: subprocess.Popen[bytes]
) -> None:
    started = process_start_time(live_process.pid)
    assert started is not None
    _plant_lock(conn, live_process.pid, started - 3600.0)  # same pid, an older process
    claim = delivery.claim_lock(conn, this_worker("test"), engine_store.now_iso())
    assert claim.acquired
    assert claim.taken_over_from is not None
    assert "is now a different process" in (claim.reason or "")


def test_a_lock_held_from_another_host_is_never_taken_over(conn: sqlite3.Connection) -> None:
    pid, started = _dead_pid()
    _plant_lock(conn, pid, started, host="some-other-host")
    claim = delivery.claim_lock(conn, this_worker("test"), engine_store.now_iso())
    assert not claim.acquired
    assert claim.holder is not None
    assert claim.holder.host == "some-other-host"


def test_a_second_worker_in_a_live_process_is_refused(conn: sqlite3.Connection) -> None:
    first, second = this_worker("a"), this_worker("b")
    assert delivery.claim_lock(conn, first, engine_store.now_iso()).acquired
    claim = delivery.claim_lock(conn, second, engine_store.now_iso())
    assert not claim.acquired
    assert claim.holder is not None
    assert claim.holder.owner == first.owner
    # Re-claiming by the holder itself is a no-op, not a refusal.
    assert delivery.claim_lock(conn, first, engine_store.now_iso()).acquired
