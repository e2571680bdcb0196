"""`chief serve` as a real process: the crash window between the Telegram send and the mark,
measured; fault points inert unless named; one door per chief.db; the 0600 key; SIGTERM."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chief.phone.pacing import REPEAT_MARKER
from chief.telegram.emulator import parse_fault
from tests.e2e.door.conftest import NOTIFY_URL, Harness, spawn_door
from tests.support.door import batch, body, key_headers
from tests.support.procs import socket_client
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FAULT_EXIT_STATUS = 86
DIGEST_ROWS = 5


def refuse_every_send(harness: Harness) -> None:
    harness.emulator.arm(parse_fault({"mode": "5xx", "count": 10_000, "status": 502}))


def test_door_crash_between_send_and_mark_rings_again_but_chief_once(harness: Harness) -> None:
    document = body("41", text="todo #41 done: crash window")
    door = spawn_door(harness.env(COOP_TEST_FAULTS="door.after_telegram_send"))
    with pytest.raises(httpx.TransportError):
        harness.notify(door, document)  # the sender dies while the notify waits for its ring
    assert door.proc.wait(15) == FAULT_EXIT_STATUS
    # Telegram accepted it, the Chief line landed, the sent mark was never written.
    assert harness.emulator.texts() == [document["text"]]
    assert harness.chief_lines("41") == 1
    assert harness.sent_marks("41") == 0

    # The entry is still queued, in flight: the restarted door knows the send is in doubt and
    # rings it once more without being asked, marked as a possible repeat.
    door = spawn_door(harness.env())
    wait_until_sync(lambda: harness.sent_marks("41") == 1, timeout_s=15, what="the mark")
    # The documented window, measured: the phone rang twice, the Chief has one line.
    assert harness.emulator.texts() == [document["text"], REPEAT_MARKER + document["text"]]
    assert harness.status(door)["telegram_queue"]["in_doubt_events"] == 1
    assert harness.chief_lines("41") == 1
    retried = harness.notify(door, document)
    assert retried.status_code == 200, retried.text
    assert retried.json()["already_sent"] is True
    assert len(harness.emulator.messages) == 2
    assert door.terminate() == 0


def _in_doubt_gauge(base: str) -> float:
    """`coop_telegram_in_doubt_events` from the door's /metrics (keyless, on TCP)."""
    answer = httpx.get(base + "/metrics", timeout=10, trust_env=False)
    assert answer.status_code == 200, answer.text
    families = {f.name: f for f in text_string_to_metric_families(answer.text)}
    assert "coop_telegram_in_doubt_events" in families, sorted(families)
    [sample] = families["coop_telegram_in_doubt_events"].samples
    return sample.value


def test_door_killed_after_telegram_took_a_digest_repeats_its_rows_once_as_one_marked_group(
    harness: Harness,
) -> None:
    """The door dies (the fault point exits at once, as SIGKILL would) after Telegram accepted
    a digest and before its sent mark. At restart the in-flight record written before the send
    makes it one in-doubt event: the same rows ring once more, as the same group (not grown by
    the rows queued since), with the repeat marker; then the new rows ring once each."""
    first = [f"d{n}" for n in range(DIGEST_ROWS)]
    refuse_every_send(harness)
    door = spawn_door(harness.env(COOP_TEST_FAULTS="door.after_telegram_send"))
    assert harness.notify_batch(door, batch(first)).status_code == 200
    door.wait_event("door.send_failed")  # the whole queue was tried, and waits
    harness.emulator.faults.clear()
    assert door.proc.wait(30) == FAULT_EXIT_STATUS
    digest = harness.emulator.texts()
    assert len(digest) == 1
    assert digest[0].startswith(f"{DIGEST_ROWS} updates")
    assert sum(harness.sent_marks(row) for row in first) == 0

    refuse_every_send(harness)  # the repeat waits while new rows queue behind it
    door = spawn_door(harness.env(CHIEF_METRICS_PORT="0"))
    later = ["d-later-1", "d-later-2"]
    for row in later:
        assert harness.notify(door, body(row, text=f"row <{row}>")).status_code == 200
    door.wait_event("door.send_failed")
    harness.emulator.faults.clear()
    wait_until_sync(
        lambda: all(harness.sent_marks(row) == 1 for row in first + later),
        timeout_s=30,
        what="every row marked sent",
    )
    texts = harness.emulator.texts()
    assert texts[1] == REPEAT_MARKER + digest[0]  # the same group, marked
    for row in first:
        assert sum(f"row <{row}>" in text for text in texts) == 2, texts
    for row in later:
        assert sum(f"row <{row}>" in text for text in texts) == 1, texts
    assert not any(text.startswith(REPEAT_MARKER) for text in texts[2:])
    assert harness.status(door)["telegram_queue"]["in_doubt_events"] == 1
    assert _in_doubt_gauge(door.metrics_base()) == 1  # monitoring sees it too
    (event,) = door.events("door.send_in_doubt")
    assert event["entries"] == DIGEST_ROWS
    assert door.terminate() == 0


def test_door_stopped_while_a_send_waits_past_its_deadline_repeats_it_once_marked(
    harness: Harness,
) -> None:
    """SIGTERM waits TELEGRAM_TIMEOUT_S (+1 s) for the send in flight; one still unanswered is
    left in flight in chief.db (the door exits 0), and the next start repeats it once, marked."""
    harness.emulator.arm(parse_fault({"mode": "delay", "delay_s": 60.0}))
    door = spawn_door(harness.env(TELEGRAM_TIMEOUT_S="1"))
    assert harness.notify(door, body("44", text="todo #44 done: slow")).status_code == 200
    wait_until_sync(
        lambda: harness.status(door)["telegram_queue"]["send_slow"],
        timeout_s=15,
        what="the send to be slow",
    )
    assert door.terminate() == 0
    assert harness.sent_marks("44") == 0
    door = spawn_door(harness.env(TELEGRAM_TIMEOUT_S="1"))
    wait_until_sync(lambda: harness.sent_marks("44") == 1, timeout_s=15, what="the mark")
    assert harness.emulator.texts() == [
        "todo #44 done: slow",
        REPEAT_MARKER + "todo #44 done: slow",
    ]
    assert harness.status(door)["telegram_queue"]["in_doubt_events"] == 1
    assert door.terminate() == 0


def test_door_crash_after_report_rings_once_after_restart(harness: Harness) -> None:
    document = body("42", text="todo #42 done: crash after report")
    door = spawn_door(harness.env(COOP_TEST_FAULTS="door.after_report"))
    with pytest.raises(httpx.TransportError):
        harness.notify(door, document)
    assert door.proc.wait(15) == FAULT_EXIT_STATUS
    assert harness.emulator.messages == []
    assert harness.chief_lines("42") == 1

    # A fault list that names other points leaves these inert; the queue resumes on start.
    door = spawn_door(harness.env(COOP_TEST_FAULTS="door.not_a_point,engine.other"))
    wait_until_sync(lambda: harness.sent_marks("42") == 1, timeout_s=15, what="the ring")
    answer = harness.notify(door, document)
    assert answer.status_code == 200
    assert answer.json()["already_sent"] is True
    assert harness.emulator.texts() == [document["text"]]
    assert harness.chief_lines("42") == 1
    assert door.terminate() == 0
    assert door.events("door.stopped")


def test_door_retry_storm_against_a_slow_telegram_rings_once(harness: Harness) -> None:
    """A real door process; Telegram answers only after 3 s while the engine's client gives up
    after 1 s and retries: 10 concurrent posts of one row, then 5 retries as they time out."""
    door = spawn_door(harness.env(TELEGRAM_TIMEOUT_S="10"))
    harness.emulator.arm(parse_fault({"mode": "delay", "delay_s": 3.0, "count": 1}))
    document = body("storm", text="todo #50 done: storm against slow Telegram")
    outcomes: list[str] = []
    lock = threading.Lock()

    def post(retries: int) -> None:
        with socket_client(door.socket_path, timeout_s=1.0) as client:
            for _ in range(1 + retries):
                try:
                    client.post(NOTIFY_URL, json=document, headers=key_headers())
                    result = "answered"
                except httpx.TimeoutException:
                    result = "timeout"
                with lock:
                    outcomes.append(result)
                if result != "timeout":
                    return

    threads = [threading.Thread(target=post, args=(1 if n < 5 else 0,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    wait_until_sync(
        lambda: (s := harness.status(door))["notify_in_flight"] == 0 and s["sent_count"] == 1,
        timeout_s=20,
        what="every handler to finish",
    )
    status = harness.status(door)
    assert status["notify_locks"] == 0
    assert status["telegram_queue"]["depth"] == 0
    assert harness.emulator.texts() == [document["text"]]
    assert harness.chief_lines("storm") == 1
    assert harness.sent_marks("storm") == 1
    assert len(door.events("door.rung")) == 1
    assert door.terminate() == 0


def test_door_second_serve_on_the_same_db_refuses(harness: Harness) -> None:
    first = spawn_door(harness.env())
    second = spawn_door(harness.env(), wait_listening=False)
    assert second.proc.wait(20) == 1
    wait_until_sync(lambda: "already runs" in second.stderr(), timeout_s=5)
    assert str(first.proc.pid) in second.stderr()
    assert harness.notify(first, body("43")).status_code == 200
    assert first.terminate() == 0


@pytest.mark.parametrize("mode", [0o644, 0o640])
def test_door_refuses_to_start_with_a_key_file_not_0600(harness: Harness, mode: int) -> None:
    os.chmod(harness.folder / "service.key", mode)
    result = subprocess.run(
        [sys.executable, "-m", "chief", "serve"],
        env=harness.env(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    message = result.stderr.decode()
    assert "COOP_SERVICE_KEY_FILE" in message
    assert "0600" in message
    assert f"{mode:04o}" in message


def test_door_refuses_to_start_with_a_bad_setting(harness: Harness) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "chief", "serve"],
        env=harness.env(CHIEF_METRICS_PORT="eighty"),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "CHIEF_METRICS_PORT" in result.stderr.decode()
