"""Crashes and restarts with real processes: SIGKILL mid-drain, a fault after the door answered,
SIGTERM, and a `coop` verb's kick reaching a running daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import REPO, log_events, notifier_env, start_notifier
from tests.integration.notifier.notifier_helpers import add_rows, lock_row, states
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

FAULT_EXIT_STATUS = 86


def _fresh_db(tmp_path: Path) -> Path:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    return db_path


def _all_delivered(db_path: Path, count: int) -> bool:
    found = states(db_path)
    return len(found) == count and set(found.values()) == {"delivered"}


def _terminate(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


@pytest.mark.slow
def test_a_daemon_killed_mid_drain_and_restarted_delivers_every_row(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 500)
    log = tmp_path / "daemon.log"
    door = TestDoor(delay_s=0.002)  # a 500-row drain long enough to be killed in the middle
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off", COOP_BACKSTOP_S="600")
        first = start_notifier(["run"], env, log)
        wait_until_sync(lambda: len(door.received) >= 150, timeout_s=60, what="150 rows at door")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        at_kill = len(door.received)
        held = lock_row(db_path)
        assert held is not None  # the dead daemon's lock is still there ...
        assert held["pid"] == first.pid
        second = start_notifier(["run"], env, log)  # ... and is taken over, not waited out
        try:
            wait_until_sync(lambda: _all_delivered(db_path, 500), timeout_s=60, what="all rows")
        finally:
            status = _terminate(second)
    assert status == 0
    assert at_kill < 500, "the kill came after the drain: nothing was tested"
    seen = door.ids(db_path)
    assert set(seen) == set(ids)  # the door saw every row at least once
    resent = door.resent(db_path)
    print(f"SIGKILL at {at_kill}/500 rows: re-sent rows {resent}")
    record_property("notifier_resent_rows", len(resent))
    # One row at a time: at most the row in flight at the kill is posted twice.
    assert len(resent) <= 1
    taken = [e for e in log_events(log) if e.get("event") == "worker.lock.taken_over"]
    assert [e["dead_pid"] for e in taken] == [first.pid]
    assert lock_row(db_path) is None
    assert not Path(str(db_path) + ".kick").exists()


def test_a_crash_after_the_door_answered_resends_that_row_once_on_restart(
    tmp_path: Path,
) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 3)
    log = tmp_path / "drain.log"
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off")
        crashed = start_notifier(
            ["drain"], {**env, "COOP_TEST_FAULTS": "notifier.after_door_answer"}, log
        )
        assert crashed.wait(timeout=30) == FAULT_EXIT_STATUS
        assert door.ids(db_path) == ids[:1]
        assert set(states(db_path).values()) == {"pending"}
        again = start_notifier(["drain"], env, log)
        assert again.wait(timeout=30) == 0
    assert door.ids(db_path) == [ids[0], *ids]
    assert door.resent(db_path) == {ids[0]: 2}
    assert _all_delivered(db_path, 3)
    assert lock_row(db_path) is None


def test_sigterm_finishes_the_row_in_flight_and_exits_0(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    add_rows(db_path, 200)
    log = tmp_path / "daemon.log"
    door = TestDoor(delay_s=0.01)
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off")
        proc = start_notifier(["run"], env, log)
        wait_until_sync(lambda: len(door.received) >= 5, timeout_s=30, what="drain under way")
        assert _terminate(proc) == 0
    delivered = [i for i, s in states(db_path).items() if s == "delivered"]
    # Every row the door accepted is marked: the one in flight was finished, none abandoned.
    assert sorted(door.ids(db_path)) == delivered
    assert lock_row(db_path) is None
    events = [e.get("event") for e in log_events(log)]
    assert events[-1] == "notifier.daemon.stopped"


def test_a_coop_verb_kicks_the_running_daemon_without_polling(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    log = tmp_path / "daemon.log"
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(
            tmp_path, db_path, door_socket, COOP_KICK="datagram", COOP_BACKSTOP_S="600"
        )
        proc = start_notifier(["run"], env, log)
        try:
            wait_until_sync(
                lambda: any(e.get("event") == "notifier.daemon.started" for e in log_events(log)),
                what="daemon started",
            )
            done = subprocess.run(
                [sys.executable, "-m", "engine", "notify", "build finished", "--as", "builder"],
                env=env,
                cwd=REPO,
                capture_output=True,
                timeout=30,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            # The backstop is 10 minutes: only the kick can deliver within this wait.
            wait_until_sync(lambda: len(door.received) == 1, timeout_s=20, what="kicked row")
        finally:
            assert _terminate(proc) == 0
    assert door.received[0]["text"] == "build finished"


def test_the_command_line_refuses_a_readable_key_and_a_wrong_setting(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    env = notifier_env(tmp_path, db_path, tmp_path / "no-door.sock")
    key = Path(env["COOP_SERVICE_KEY_FILE"])
    key.chmod(0o644)
    run = [sys.executable, "-m", "notifier", "drain"]
    loose = subprocess.run(run, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    assert loose.returncode == 2
    assert "COOP_SERVICE_KEY_FILE" in loose.stderr
    assert "0600" in loose.stderr
    key.chmod(0o600)
    wrong = subprocess.run(
        run,
        env={**env, "COOP_CLIENT_TIMEOUT_S": "soon"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2
    assert "COOP_CLIENT_TIMEOUT_S" in wrong.stderr
    version = subprocess.run(
        [sys.executable, "-m", "notifier", "--version"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert version.returncode == 0
    assert version.stdout.startswith("coop-notifier ")
    assert os.access(key, os.R_OK)


def test_a_bounded_drain_process_stops_after_its_count(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 5)
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off")
        proc = start_notifier(["drain", "--max-runs", "2"], env, tmp_path / "drain.log")
        assert proc.wait(timeout=30) == 0
    assert door.ids(db_path) == ids[:2]
    assert lock_row(db_path) is None
