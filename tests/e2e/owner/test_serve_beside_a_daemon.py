"""`coop serve` beside a standalone notifier daemon (`coop-notifier run`) on the same coop.db, all
real processes against a test door: the service says once that it serves the owner endpoint and
leaves delivery to that daemon (which delivers meanwhile); when the daemon stops, the service's
own daemon takes delivery over within seconds, and a row written afterwards reaches the door
from the service, with no drainer spawned (`COOP_KICK=datagram`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.owner.conftest import ServeProcess, ok
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.procs import Service, child_env

# The service retries the daemon's lock about once a second (notifier.engine_service): a few
# seconds, with room for a loaded machine, bound the takeover.
TAKEOVER_TIMEOUT_S = 10.0


def delivered_ids(events: list[dict[str, Any]]) -> set[int]:
    found: set[int] = set()
    for event in events:
        if "outbox_id" in event:
            found.add(int(event["outbox_id"]))
        found.update(int(each) for each in event.get("outbox_ids", []))
    return found


def test_serve_leaves_delivery_to_a_running_daemon_and_takes_it_over_when_it_stops(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    door = TestDoor(key=Path(stack_env["COOP_SERVICE_KEY_FILE"]).read_text().strip())
    with serve_door_in_thread(door, tmp_path / "door.sock") as path:
        env = {**stack_env, "COOP_DOOR_SOCKET": path, "COOP_KICK": "datagram"}
        daemon = Service(
            "daemon",
            ["notifier", "run"],
            tmp_path,
            "notifier.daemon.started",
            child_env(env),
            takes_port=False,
        )
        daemon.start()
        serve = ServeProcess(tmp_path, env)
        try:
            _leave_then_take_over(serve.start(), daemon, door, env)
        finally:
            serve.stop_quietly()
            if daemon.running:
                daemon.kill()


def _leave_then_take_over(
    serve: ServeProcess, daemon: Service, door: TestDoor, env: dict[str, str]
) -> None:
    left = serve.wait_event("service.delivery_left_to_daemon")
    assert left["daemon_pid"] == daemon.pid
    assert serve.get("/status", timeout=10).json()["daemon"] is False

    ok(env, "notify", "while the daemon runs")
    daemon.wait_for(
        lambda: delivered_ids(daemon.events("outbox.delivered")) == {1},
        "the standalone daemon to deliver row 1",
    )

    assert daemon.terminate() == 0
    ok(env, "notify", "after the daemon stopped")
    serve.wait_for(
        lambda: delivered_ids(serve.events("outbox.delivered")) == {2},
        "coop serve to take delivery over and deliver row 2",
        timeout_s=TAKEOVER_TIMEOUT_S,
    )
    assert door.ids(env["COOP_DB"]) == [1, 2]
    assert len(serve.events("service.delivery_left_to_daemon")) == 1
    assert serve.events("service.delivery_taken_over")
    assert serve.get("/status", timeout=10).json()["daemon"] is True
    assert "Traceback" not in serve.log()
    assert serve.terminate() == 0


def test_serve_waiting_beside_a_daemon_stops_on_sigterm_and_leaves_the_daemon_running(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    env = {**stack_env, "COOP_KICK": "datagram"}
    daemon = Service(
        "daemon", ["notifier", "run"], tmp_path, "notifier.daemon.started", child_env(env),
        takes_port=False,
    )  # fmt: skip
    daemon.start()
    serve = ServeProcess(tmp_path, env)
    try:
        serve.start().wait_event("service.delivery_left_to_daemon")

        assert serve.terminate() == 0
        assert serve.events("service.stopped")
        assert not serve.events("service.delivery_taken_over")
        assert daemon.running
        assert daemon.terminate() == 0
    finally:
        serve.stop_quietly()
        if daemon.running:
            daemon.kill()
