"""The daemon in-process on a ledger the cutover's fence guards (a cutover cut short before its
owner file: the fence and no file), its rows pending: at its first drain it says so in one line
and `run()` returns by itself, releasing the ledger's lock and spawning nothing, so that
`coop serve`'s daemon can take delivery over. A drain that fails for another reason keeps the
usual backoff and the lock."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from engine import owner, store
from notifier.daemon import Daemon, InstanceLock
from notifier.errors import DaemonAlreadyRunning
from tests.integration.notifier.notifier_helpers import add_rows, make_config, states
from tests.support.waiting import wait_until

UNREACHABLE_DOOR = "http://127.0.0.1:9/api/coop/engine/notify"
STEP_ASIDE_TIMEOUT_S = 10.0


def fence(db_path: Path) -> None:
    conn = owner.register_fence_function(store.open_connection(db_path))
    try:
        with store.write(conn):
            store.install_fence(conn)
    finally:
        conn.close()


async def test_a_fenced_out_daemon_steps_aside_in_one_line(db_path: Path) -> None:
    add_rows(db_path, 2)
    fence(db_path)
    daemon = Daemon(make_config(db_path, UNREACHABLE_DOOR))

    with capture_logs() as logs, anyio.fail_after(STEP_ASIDE_TIMEOUT_S):
        await daemon.run()  # returns by itself: nobody called stop()

    events = [entry["event"] for entry in logs]
    assert events.count("notifier.daemon.stepped_aside") == 1, events
    assert "notifier.daemon.drain_failed" not in events
    assert not any(entry.get("outcome") == "kicked_successor" for entry in logs)
    [aside] = [entry for entry in logs if entry["event"] == "notifier.daemon.stepped_aside"]
    assert "`coop cutover --undo`" in aside["note"]
    assert set(states(db_path).values()) == {"pending"}
    assert not daemon.socket_path.exists()
    lock = InstanceLock(db_path)
    lock.acquire()  # released: coop serve's daemon can take the ledger
    lock.release()


async def test_a_drain_failing_otherwise_keeps_the_backoff_and_the_lock(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_TEST_FAULTS", "notifier.delivery.claim:raise")
    add_rows(db_path, 1)
    daemon = Daemon(make_config(db_path, UNREACHABLE_DOOR))

    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run)
            await wait_until(
                lambda: any(e["event"] == "notifier.daemon.drain_failed" for e in logs),
                what="a failed drain",
            )
            with pytest.raises(DaemonAlreadyRunning):
                InstanceLock(db_path).acquire()  # still this daemon's
            daemon.stop()

    assert not any(entry["event"] == "notifier.daemon.stepped_aside" for entry in logs)
