"""No row without a wakeup. Without a daemon (spawn mode, CLI-only), a head row the door
deferred is retried by its due time (+ at most 60 s) with no new producer: the one-shot drainer
that deferred it waits out a short deferral (one waiter per store), and `drain --no-wait` (what
the systemd timer runs every minute) leaves it at once. Real processes throughout."""

from __future__ import annotations

import configparser
import time
from datetime import datetime
from pathlib import Path

from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import (
    REPO,
    log_events,
    notifier_env,
    produce,
    start_notifier,
)
from tests.integration.notifier.notifier_helpers import add_rows, lock_row, outbox_row, states
from tests.support.loopback_door import Answer, TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

SYSTEMD = REPO / "ops" / "systemd"
# The door's Retry-After: the deferral the drainer must wait out by itself.
SHORT_RETRY_AFTER_S = 2
LONG_RETRY_AFTER_S = 120  # beyond the drainer's wait: left to the timer or the daemon
EXTRA_KICKS = 3


def _fresh_db(tmp_path: Path) -> Path:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    return db_path


def _produce(env: dict[str, str], db_path: Path, text: str) -> int:
    row_id, how = produce(env, db_path, text)
    assert how == "spawned"
    return row_id


def _events(log: Path, name: str) -> list[dict[str, object]]:
    return [e for e in log_events(log) if e.get("event") == name]


def _stamp(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def _retried_late_by(log: Path) -> float:
    """How long after its due time the deferred row was delivered, from the process's own log
    (load on the machine delays the test's view, not these stamps)."""
    [deferred] = _events(log, "outbox.deferred")
    [delivered] = _events(log, "outbox.delivered")
    due = _stamp(deferred) + float(deferred["retry_in_s"])  # type: ignore[arg-type]
    # The deferral's stamp is logged just after the row's due time was computed: allow for it.
    return _stamp(delivered) - due + 0.05


def _unavailable(retry_after_s: int) -> Answer:
    return Answer(
        503,
        headers={"Retry-After": str(retry_after_s)},
        body={"detail": "notification_channel_unavailable"},
    )


def test_a_spawned_drainer_waits_out_a_short_deferral_with_no_new_producer(
    tmp_path: Path,
) -> None:
    db_path = _fresh_db(tmp_path)
    drainer_log = Path(str(db_path) + ".drainer.log")
    door = TestDoor(script=[_unavailable(SHORT_RETRY_AFTER_S)])
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="auto")
        row = _produce(env, db_path, "deferred once")
        wait_until_sync(
            lambda: _events(drainer_log, "outbox.deferred"), timeout_s=30, what="the deferral"
        )
        # Nothing else happens: no producer, no daemon. The drainer itself must come back.
        wait_until_sync(
            lambda: door.ids(db_path) == [row], timeout_s=SHORT_RETRY_AFTER_S + 30, what="the retry"
        )
        wait_until_sync(lambda: _events(drainer_log, "notifier.exit"), what="the drainer's exit")
    late_s = _retried_late_by(drainer_log)
    print(f"deferred {SHORT_RETRY_AFTER_S} s by the door; retried {late_s:.3f} s after it was due")
    assert 0 <= late_s <= 60
    assert states(db_path) == {row: "delivered"}
    assert lock_row(db_path) is None
    assert [e["outcome"] for e in _events(drainer_log, "notifier.exit")] == ["released"]


def test_a_daemon_retries_a_deferred_head_at_its_due_time_with_no_new_producer(
    tmp_path: Path,
) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 1)
    log = tmp_path / "daemon.log"
    door = TestDoor(script=[_unavailable(SHORT_RETRY_AFTER_S)])
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off", COOP_BACKSTOP_S="600")
        proc = start_notifier(["run"], env, log)
        try:
            wait_until_sync(lambda: _events(log, "outbox.deferred"), timeout_s=30, what="deferral")
            wait_until_sync(
                lambda: door.ids(db_path) == ids, timeout_s=30, what="the daemon's retry"
            )
            wait_until_sync(lambda: _events(log, "outbox.delivered"), what="the delivery mark")
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0
    assert 0 <= _retried_late_by(log) <= 60
    assert states(db_path) == {ids[0]: "delivered"}


def test_one_drainer_waits_however_many_kicks_arrive_meanwhile(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    drainer_log = Path(str(db_path) + ".drainer.log")
    door = TestDoor(script=[_unavailable(SHORT_RETRY_AFTER_S + 1)])
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="auto")
        rows = [_produce(env, db_path, "head")]
        wait_until_sync(lambda: _events(drainer_log, "notifier.drain.waiting"), what="a waiter")
        # More producers while the head is deferred: their drainers find the head not due and
        # leave it to the waiter instead of each lingering beside it.
        rows += [_produce(env, db_path, f"behind {n}") for n in range(EXTRA_KICKS)]
        wait_until_sync(
            lambda: len(_events(drainer_log, "notifier.exit")) == EXTRA_KICKS,
            timeout_s=30,
            what="the other drainers' exits",
        )
        # (Whether the head was still deferred when they left depends on how fast the machine
        # starts processes; what must hold is the single waiter, checked below.)
        wait_until_sync(lambda: len(door.received) == len(rows), timeout_s=30, what="delivery")
        wait_until_sync(
            lambda: len(_events(drainer_log, "notifier.exit")) == EXTRA_KICKS + 1,
            what="the waiter's exit",
        )
    assert door.ids(db_path) == rows
    waiting_pids = {e.get("pid") for e in _events(drainer_log, "notifier.drain.waiting")}
    assert len(waiting_pids) == 1
    assert lock_row(db_path) is None


def test_a_long_deferral_and_no_wait_leave_the_row_to_the_timer_at_once(tmp_path: Path) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 1)
    door = TestDoor(script=[_unavailable(SHORT_RETRY_AFTER_S), _unavailable(LONG_RETRY_AFTER_S)])
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="off")
        # What the timer runs: a short deferral is not waited for either.
        log = tmp_path / "timer-drain.log"
        assert start_notifier(["drain", "--no-wait"], env, log).wait(timeout=30) == 0
        assert _events(log, "outbox.deferred")
        assert not _events(log, "notifier.drain.waiting")
        # Once it is due, a plain drain tries it, is deferred past its wait bound, and leaves.
        due_at = float(outbox_row(db_path, ids[0])["next_attempt_at"])  # type: ignore[arg-type]
        wait_until_sync(lambda: time.time() > due_at, timeout_s=30, what="due again")
        log = tmp_path / "drain.log"
        assert start_notifier(["drain"], env, log).wait(timeout=30) == 0
        assert len(door.script) == 0
        assert not _events(log, "notifier.drain.waiting")
        [left] = [e for e in _events(log, "worker.handoff") if e.get("deferred_head")]
        assert left["deferred_head"] == ids[0]
    assert states(db_path) == {ids[0]: "pending"}
    assert lock_row(db_path) is None


def _unit(name: str) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment, method-assign]
    parser.read(SYSTEMD / name)
    return parser


def test_the_retry_timer_runs_a_no_wait_drain_every_minute_as_hardened_as_the_engine() -> None:
    timer, service, engine = (
        _unit("coop-notifier-retry.timer"),
        _unit("coop-notifier-retry.service"),
        _unit("coop-engine.service"),
    )
    assert timer["Timer"]["Unit"] == "coop-notifier-retry.service"
    period = timer["Timer"]["OnUnitActiveSec"]
    assert period.endswith("s")
    assert int(period[:-1]) <= 60
    assert timer["Install"]["WantedBy"] == "timers.target"
    assert service["Service"]["Type"] == "oneshot"
    assert service["Service"]["ExecStart"] == "/opt/coop/.venv/bin/coop-notifier drain --no-wait"
    for key, value in engine["Service"].items():
        if key in ("Type", "ExecStart", "KillSignal", "TimeoutStopSec", "Restart", "RestartSec"):
            continue
        assert service["Service"].get(key) == value, key


def test_in_service_mode_a_drain_leaves_the_store_to_the_owner_and_a_daemon_refuses(
    tmp_path: Path,
) -> None:
    db_path = _fresh_db(tmp_path)
    ids = add_rows(db_path, 1)
    owner_file = Path(str(db_path) + ".owner.json")
    owner_file.write_text(f'{{"mode": "service", "database": "{db_path}"}}')
    owner_file.chmod(0o600)  # as `coop cutover` writes it
    env = notifier_env(tmp_path, db_path, tmp_path / "no-door.sock", COOP_KICK="off")
    log = tmp_path / "timer-drain.log"
    assert start_notifier(["drain", "--no-wait"], env, log).wait(timeout=30) == 0
    [exit_event] = _events(log, "notifier.exit")
    assert exit_event["outcome"] == "owner_service_drains"
    log = tmp_path / "daemon.log"
    assert start_notifier(["run"], env, log).wait(timeout=30) == 2
    [refusal] = [line for line in log.read_text().splitlines() if line.startswith("coop-notifier")]
    assert "service mode" in refusal
    assert "Traceback" not in log.read_text()
    owner_file.write_text("{not json")
    log = tmp_path / "broken.log"
    assert start_notifier(["drain"], env, log).wait(timeout=30) == 1
    assert "owner file" in log.read_text()
    assert "Traceback" not in log.read_text()
    owner_file.unlink()
    assert states(db_path) == {ids[0]: "pending"}
