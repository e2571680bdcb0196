"""A program using the Python API alone (no `coop` CLI) wakes the notifier after its commit,
exactly as the CLI does: a running daemon by datagram, else a spawned one-shot drainer."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from engine import direct, ledger, outbox
from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import log_events, notifier_env, start_notifier
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

# Far beyond every wait below: only a kick can deliver within them.
BACKSTOP_S = "600"
DELIVERY_BOUND_S = 1.0
# A spawned drainer is a cold Python start (~0.5 s here on a quiet machine); on 2 shared cores
# under the suite, more. The bound only says the kick happened: without it the row waits forever.
SPAWNED_BOUND_S = 3.0


def _use_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """This test process is the library caller: it runs with the stack's environment."""
    for name in [k for k in list(__import__("os").environ) if k.startswith("COOP_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def _delivered_within(door: TestDoor, count: int, started: float) -> float:
    wait_until_sync(lambda: len(door.received) >= count, timeout_s=10, what="delivery")
    return time.monotonic() - started


def test_library_verbs_wake_a_running_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    log = tmp_path / "daemon.log"
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(
            tmp_path, db_path, door_socket, COOP_KICK="auto", COOP_BACKSTOP_S=BACKSTOP_S
        )
        _use_env(monkeypatch, env)
        proc = start_notifier(["run"], env, log)
        try:
            wait_until_sync(
                lambda: any(e.get("event") == "notifier.daemon.started" for e in log_events(log)),
                what="daemon started",
            )
            # The first row pays for one-time costs (the daemon's first connection to the door,
            # this process's first write); the backstop is 10 minutes, so it too was kicked.
            outbox.notify("warming up", actor="builder")
            _delivered_within(door, 1, time.monotonic())
            todo = ledger.add_todo("water the plants", actor="builder")["todo"]["id"]
            started = time.monotonic()
            ledger.done_todo(todo, actor="builder", result_summary="watered")
            first_s = _delivered_within(door, 2, started)
            started = time.monotonic()
            outbox.notify("the build is green", actor="builder")
            second_s = _delivered_within(door, 3, started)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    print(f"library kick to a daemon: {first_s * 1000:.0f} ms, {second_s * 1000:.0f} ms")
    assert first_s < DELIVERY_BOUND_S
    assert second_s < DELIVERY_BOUND_S
    assert [r["text"] for r in door.received] == [
        "warming up",
        "todo #1 done by builder: water the plants\nwatered",
        "the build is green",
    ]


def test_library_verbs_spawn_a_drainer_when_no_daemon_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    drainer_log = Path(str(db_path) + ".drainer.log")
    door = TestDoor()
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        _use_env(monkeypatch, notifier_env(tmp_path, db_path, door_socket, COOP_KICK="auto"))
        started = time.monotonic()
        outbox.notify("from a script", actor="script")
        spawned_s = _delivered_within(door, 1, started)
        # An operator's retry through the API is a kick too.
        wait_until_sync(
            lambda: sum(e.get("event") == "notifier.exit" for e in log_events(drainer_log)) == 1,
            what="the drainer's exit",
        )
        with direct.connection(db_path) as conn:
            conn.execute(
                "UPDATE coop_outbox SET state = 'pending', attempts = 1,"
                " next_attempt_at = next_attempt_at + 3600"
            )
        started = time.monotonic()
        outbox.retry(1, actor="operator")
        retried_s = _delivered_within(door, 2, started)
        wait_until_sync(
            lambda: sum(e.get("event") == "notifier.exit" for e in log_events(drainer_log)) == 2,
            what="the second drainer's exit",
        )
    print(f"library kick, spawned drainer: {spawned_s * 1000:.0f} ms, {retried_s * 1000:.0f} ms")
    assert spawned_s < SPAWNED_BOUND_S
    assert retried_s < SPAWNED_BOUND_S


def test_a_wrong_kick_mode_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.errors import UsageError

    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    _use_env(monkeypatch, {"COOP_DB": str(db_path), "COOP_KICK": "sometimes"})
    with pytest.raises(UsageError, match="COOP_KICK must be one of auto, datagram, off"):
        outbox.notify("never written", actor="script")
    with direct.connection(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM coop_outbox").fetchone()[0] == 0
