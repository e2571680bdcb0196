"""A Telegram outage end to end, as an operator meets it: a row written with `coop notify`,
delivered to a real `chief serve` process by a real `coop-notifier drain`, while Telegram (the
emulator, its fault armed over its HTTP API) fails every send. The outbox counts the row
delivered (the door queued it), so only the door's Telegram queue can tell: `coop status
--check` exits 1 naming Telegram, and the door's /metrics carry the queue's depth and age. Once
Telegram answers again the row rings and the check passes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.door.conftest import DoorProcess, Harness, spawn_door
from tests.support.procs import run_module
from tests.support.waiting import wait_until_sync

# Three processes and the sender's backoff: about 10 s, more when loaded; scheduled first.
pytestmark = pytest.mark.slow

# The pending-age limit for this test (the same for outbox rows and Telegram's queue).
MAX_AGE_S = 1.0
TIMEOUT_S = 30.0


def door_gauges(door: DoorProcess) -> dict[str, float]:
    # Keyless, as Prometheus scrapes it: /metrics alone on the door's TCP port.
    answer = httpx.get(door.metrics_base() + "/metrics", timeout=TIMEOUT_S, trust_env=False)
    assert answer.status_code == 200, answer.text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name.startswith("coop_telegram_queue_")
    }


def test_telegram_failing_every_send_fails_the_check_and_shows_in_the_door_metrics(
    harness: Harness,
) -> None:
    armed = harness.client.post(
        harness.emulator_url + "/emulator/faults",
        json={"mode": "5xx", "status": 502, "count": 10_000},
    )
    assert armed.status_code == 200, armed.text
    door = spawn_door(harness.env(CHIEF_METRICS_PORT="0"))
    env = harness.env(COOP_KICK="off")  # to the door on <folder>/door.sock, where it looks

    def coop(*args: str) -> tuple[int, str]:
        result = run_module("engine", args, env=env, inherit=False)
        # Quiet on success, but for the line of the first write that starts the ledger.
        said = [line for line in result.stderr.splitlines() if "started a new ledger" not in line]
        assert not said or result.returncode != 0, result.stderr
        return result.returncode, result.stdout

    assert coop("notify", "todo #1 done: watered", "--as", "cron")[0] == 0
    drained = run_module("notifier", ["drain"], env=env, inherit=False)
    assert drained.returncode == 0, drained.stderr

    def aged_and_failing() -> bool:
        queue: Any = harness.status(door)["telegram_queue"]
        return bool(queue["last_error"]) and (queue["oldest_age_s"] or 0.0) > MAX_AGE_S

    wait_until_sync(
        aged_and_failing,
        timeout_s=TIMEOUT_S,
        what="the Telegram queue to age past the limit with a failed send",
    )
    code, out = coop("status", "--check", "--max-pending-age", str(MAX_AGE_S))
    assert code == 1, out
    assert "outbox: 0 pending, 1 delivered" in out  # the outbox alone sees nothing wrong
    (problem,) = [line for line in out.splitlines() if line.startswith("needs a person")]
    assert "Telegram: 1 queued" in problem
    assert "Internal Server Error" in problem  # the door's last error, Telegram's words
    gauges = door_gauges(door)
    assert gauges["coop_telegram_queue_depth"] == 1
    assert gauges["coop_telegram_queue_oldest_age_seconds"] > MAX_AGE_S

    # Telegram answers again: the row rings on the sender's next try, and all is well.
    assert harness.client.post(harness.emulator_url + "/emulator/reset", json={}).status_code == 200
    wait_until_sync(
        lambda: harness.emulator.texts() == ["todo #1 done: watered"],
        timeout_s=TIMEOUT_S,
        what="the row to ring once Telegram answers",
    )
    wait_until_sync(
        lambda: door_gauges(door)["coop_telegram_queue_depth"] == 0,
        timeout_s=TIMEOUT_S,
        what="the sent mark",
    )
    code, out = coop("status", "--check", "--max-pending-age", str(MAX_AGE_S))
    assert code == 0, out
    assert door_gauges(door)["coop_telegram_queue_oldest_age_seconds"] == 0
