"""The daemon as a real process: one per store (a second, or several started together, refuse
with one line), it survives a failing store and keeps `coop serve`'s owner endpoint answering,
and it finishes its row and exits 0 however many stop signals arrive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine import service_socket
from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import REPO, log_events, notifier_env, start_notifier
from tests.integration.notifier.notifier_helpers import add_rows, lock_row, states
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

RACERS = 4


def _fresh_db(tmp_path: Path) -> Path:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    return db_path


def _started(log: Path) -> bool:
    return any(e.get("event") == "notifier.daemon.started" for e in log_events(log))


def _assert_one_line_refusal(proc: subprocess.Popen[bytes], log: Path) -> None:
    assert proc.wait(timeout=30) != 0
    text = log.read_text()
    assert "Traceback" not in text
    assert "ExceptionGroup" not in text
    lines = [line for line in text.splitlines() if line.startswith("coop-notifier:")]
    assert len(lines) == 1, text
    assert "another notifier daemon" in lines[0]


def test_a_second_daemon_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    env = notifier_env(tmp_path, db_path, tmp_path / "no-door.sock", COOP_KICK="off")
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    first = start_notifier(["run"], env, first_log)
    try:
        wait_until_sync(lambda: _started(first_log), what="the first daemon")
        second = start_notifier(["run"], env, second_log)
        _assert_one_line_refusal(second, second_log)
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=30) == 0


def test_daemons_started_together_leave_exactly_one_running(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    env = notifier_env(tmp_path, db_path, tmp_path / "no-door.sock", COOP_KICK="off")
    logs = [tmp_path / f"racer-{n}.log" for n in range(RACERS)]
    procs = [start_notifier(["run"], env, log) for log in logs]
    try:
        # Every racer has either started or refused; then only one may still run.
        racers = list(zip(procs, logs, strict=True))
        wait_until_sync(
            lambda: all(p.poll() is not None or _started(log) for p, log in racers),
            timeout_s=30,
            what="every racer settled",
        )
        running = [n for n, p in enumerate(procs) if p.poll() is None]
        assert len(running) == 1, [log.read_text() for log in logs]
        for n, (proc, log) in enumerate(racers):
            if n not in running:
                _assert_one_line_refusal(proc, log)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=30) == 0


def _get_status(path: str) -> dict[str, object]:
    """`coop serve`'s /status, asked on its socket as `coop status` asks it."""
    status, raw = service_socket.call(path, "GET", "/status", timeout_s=10)
    assert status == 200, raw
    return dict(json.loads(raw))


def test_coop_serve_survives_a_failing_drain_and_its_owner_endpoint_keeps_answering(
    tmp_path: Path,
) -> None:
    db_path = _fresh_db(tmp_path)
    disk_full = tmp_path / "disk-full"
    disk_full.touch()
    log = tmp_path / "serve.log"
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(
            tmp_path,
            db_path,
            door_socket,
            COOP_KICK="datagram",
            COOP_BACKSTOP_S="600",
            COOP_METRICS_PORT="off",
            COOP_TEST_FAULTS=f"notifier.delivery.claim:raise-while={disk_full}",
        )
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve"],
                env=env,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
            )
        try:
            listening = wait_until_sync(
                lambda: next(
                    (e for e in log_events(log) if e.get("event") == "service.listening"), None
                ),
                what="coop serve listening",
            )
            url = str(listening["socket"])

            def failures() -> int:
                return sum(
                    e.get("event") == "notifier.daemon.drain_failed" for e in log_events(log)
                )

            for seen in range(1, 4):
                wait_until_sync(
                    lambda n=seen: failures() >= n or proc.poll() is not None,
                    what=f"drain failure {seen}",
                )
                assert proc.poll() is None, log.read_text()
                assert _get_status(url)["daemon"] is True
            ids = add_rows(db_path, 2)
            disk_full.unlink()
            wait_until_sync(lambda: len(door.received) == 2, timeout_s=30, what="recovery")
        finally:
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(timeout=30)
    assert status == 0, log.read_text()
    assert door.ids(db_path) == ids
    assert set(states(db_path).values()) == {"delivered"}
    assert lock_row(db_path) is None
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("command", ["run", "drain"])
def test_the_worker_finishes_its_row_and_exits_0_under_a_storm_of_stop_signals(
    tmp_path: Path, command: str
) -> None:
    db_path = _fresh_db(tmp_path)
    add_rows(db_path, 100)
    log = tmp_path / "daemon.log"
    door = TestDoor(delay_s=0.05)
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off", COOP_BACKSTOP_S="600")
        proc = start_notifier([command], env, log)
        wait_until_sync(lambda: len(door.received) >= 3, timeout_s=30, what="drain under way")
        sent = 0

        def storm() -> None:
            nonlocal sent
            # SIGTERM and SIGINT alternately until the process is gone (bounded in count).
            while proc.poll() is None and sent < 5000:
                try:
                    os.kill(proc.pid, signal.SIGTERM if sent % 2 == 0 else signal.SIGINT)
                except ProcessLookupError:
                    return
                sent += 1
                time.sleep(0.001)

        stormer = threading.Thread(target=storm)
        stormer.start()
        status = proc.wait(timeout=30)
        stormer.join(10)
    assert status == 0, log.read_text()[-2000:]
    assert sent > 1
    delivered = [i for i, s in states(db_path).items() if s == "delivered"]
    assert sorted(door.ids(db_path)) == delivered  # the row in flight was finished and marked
    assert lock_row(db_path) is None
    assert "Traceback" not in log.read_text()
