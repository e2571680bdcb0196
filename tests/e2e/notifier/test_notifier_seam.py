"""Seed 002 with real processes: a one-shot drainer is held between its last look at the queue
and its idle handoff while another producer commits a row and kicks; that producer's drainer
loses the lock and exits. The held drainer must then find the row (`work_available`) and
deliver it: no committed state leaves a queued row without a worker."""

from __future__ import annotations

from pathlib import Path

from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import log_events, notifier_env, produce
from tests.integration.notifier.notifier_helpers import lock_row, states
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync


def _exits(log: Path) -> list[str]:
    return [str(e["outcome"]) for e in log_events(log) if e.get("event") == "notifier.exit"]


def test_a_row_committed_while_a_drainer_is_held_at_its_handoff_is_delivered(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    drainer_log = Path(str(db_path) + ".drainer.log")
    gate = tmp_path / "hold-at-handoff"
    gate.touch()
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(
            tmp_path,
            db_path,
            door_socket,
            COOP_KICK="auto",
            COOP_TEST_FAULTS=f"notifier.before_handoff:pause-while={gate}",
        )
        first, how = produce(env, db_path, "first")
        assert how == "spawned"
        # The first drainer delivered its row, looked again, found nothing: it is held there.
        wait_until_sync(
            Path(str(gate) + ".reached").exists, timeout_s=30, what="drainer at the seam"
        )
        assert door.ids(db_path) == [first]
        second, how = produce(env, db_path, "second")
        assert how == "spawned"
        wait_until_sync(lambda: _exits(drainer_log) == ["lock_busy"], what="the loser's exit")
        gate.unlink()
        wait_until_sync(lambda: len(_exits(drainer_log)) == 2, timeout_s=30, what="both exits")
    assert door.ids(db_path) == [first, second]
    assert states(db_path) == {first: "delivered", second: "delivered"}
    assert lock_row(db_path) is None
    handoffs = [e["outcome"] for e in log_events(drainer_log) if e.get("event") == "worker.handoff"]
    assert handoffs == ["work_available", "released"]
    assert _exits(drainer_log) == ["lock_busy", "released"]
