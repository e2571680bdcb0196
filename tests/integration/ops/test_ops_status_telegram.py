"""A Telegram outage, seen the way an operator and Prometheus see it: `coop status` (a real CLI
process) and the door's `GET /metrics` (parsed with prometheus_client's parser), against the
real door on uvicorn (on its Unix socket, and its keyless /metrics on a loopback port, as
`chief serve` serves them) with its Telegram sender pointed at the Bot API emulator. Telegram
failing every send makes `--check` exit 1 naming Telegram, and the metrics carry the queue's
depth and age; each permanent refusal is named with what to do; a Chief-only install (no
Telegram) is not an outage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.door.config import DoorConfig
from chief.door.metrics import metrics_app
from chief.serve import create_app
from chief.telegram.emulator import create_emulator, parse_fault
from tests.integration.ops.conftest import KEY, door_on_socket, made_ledger, notify
from tests.support.asgi import serve_asgi_in_thread
from tests.support.procs import coop, socket_client
from tests.support.waiting import wait_until_sync

#: What the door says of Telegram for a row it took: queued for the sender, or no Telegram.
QUEUED = {"queued", "not_configured"}

pytestmark = pytest.mark.timeout(60)

TOKEN = "123456:outage-token"
# Older than the default pending-age limit (600 s), which `--check` applies to both queues.
LONG_AGO = timedelta(seconds=700)


class Clock:
    """The door's wall clock: now, plus whatever the test moved it by."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


@dataclass(frozen=True)
class Door:
    """Where the door under test answers: its socket, and its /metrics on TCP."""

    socket_path: str
    metrics_url: str


@contextmanager
def door_with_telegram(
    home: Path,
    clock: Clock,
    faults: list[dict[str, Any]],
    *,
    telegram: bool = True,
    door_token: str = TOKEN,
) -> Iterator[Door]:
    """The door (its socket and its /metrics), with Telegram on the emulator armed with
    `faults` (the emulator knows the bot token TOKEN; the door sends `door_token`)."""
    emulator_app, emulator = create_emulator(token=TOKEN)
    for fault in faults:
        emulator.arm(parse_fault(fault))
    with serve_asgi_in_thread(emulator_app) as emulator_url:
        env = {
            "COOP_HOME": str(home),
            "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
            "CHIEF_OWNER": "owner",
            "CHIEF_METRICS_PORT": "off",  # served below, beside the door, on a free port
        }
        if telegram:
            env |= {
                "TELEGRAM_BOT_TOKEN": door_token,
                "TELEGRAM_CHAT_ID": "4242",
                "TELEGRAM_API_BASE": emulator_url + "/bot",
            }
        config = DoorConfig.from_env(env)
        app = create_app(config, ChiefConfig.from_env(env), wall_clock=clock)
        scrape = metrics_app(config, app.state.door, app.state.metrics)
        with (
            door_on_socket(app, home / "door.sock") as path,
            serve_asgi_in_thread(scrape, lifespan="off") as metrics_url,
        ):
            yield Door(path, metrics_url)


def telegram_queue(door: Door) -> dict[str, Any]:
    with socket_client(door.socket_path) as client:
        answer = client.get("/api/coop/engine/status", headers={"X-Coop-Service-Key": KEY})
    assert answer.status_code == 200, answer.text
    queue: dict[str, Any] = answer.json()["telegram_queue"]
    return queue


def door_metrics(door: Door) -> dict[str, float]:
    """The door's /metrics as Prometheus scrapes it: keyless, on its TCP port."""
    answer = httpx.get(door.metrics_url + "/metrics", timeout=10, trust_env=False)
    assert answer.status_code == 200, answer.text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if not sample.labels
    }


def coop_status(home: Path, door: Door, *args: str):
    made_ledger(home)
    return coop("status", *args, env={"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door.socket_path})


def test_telegram_failing_every_send_fails_the_check_naming_telegram_and_shows_in_metrics(
    home: Path,
) -> None:
    clock = Clock()
    faults = [{"mode": "5xx", "count": 1000, "status": 502}]
    with door_with_telegram(home, clock, faults) as door:
        assert notify(door.socket_path, "1") in QUEUED
        assert notify(door.socket_path, "2") in QUEUED
        wait_until_sync(lambda: telegram_queue(door)["last_error"], what="the first failed send")
        young = coop_status(home, door, "--check")
        assert young.returncode == 0, young.stdout + young.stderr  # young: not yet an outage
        clock.offset = LONG_AGO
        result = coop_status(home, door, "--check")
        assert result.returncode == 1, result.stdout + result.stderr
        problems = [line for line in result.stdout.splitlines() if "needs a person" in line]
        assert len(problems) == 1, result.stdout
        assert "Telegram" in problems[0]
        assert "2 queued" in problems[0]
        assert "more than 600s" in problems[0]
        # The same limit as the outbox rows': a larger one lets it pass.
        assert coop_status(home, door, "--check", "--max-pending-age", "800").returncode == 0
        found = door_metrics(door)
    assert found["coop_telegram_queue_depth"] == 2
    assert found["coop_telegram_queue_oldest_age_seconds"] >= LONG_AGO.total_seconds()


@pytest.mark.parametrize(
    ("mode", "kind", "words", "remedy"),
    [
        ("unauthorized", "bad_token", "401 Unauthorized", "TELEGRAM_BOT_TOKEN"),
        ("chat_not_found", "chat_not_found", "400 Bad Request: chat not found", "TELEGRAM_CHAT_ID"),
        ("bot_blocked", "bot_blocked", "403 Forbidden: bot was blocked by the user", "unblock"),
    ],
)
def test_coop_status_names_a_permanent_refusal_and_what_to_do(
    home: Path, mode: str, kind: str, words: str, remedy: str
) -> None:
    faults = [{"mode": mode, "count": 1000, "methods": ["getMe", "sendMessage"]}]
    with door_with_telegram(home, Clock(), faults) as door:
        assert notify(door.socket_path, "1") in QUEUED
        wait_until_sync(
            lambda: telegram_queue(door)["refusal"], what="the refusal in the door's status"
        )
        human = coop_status(home, door, "--check")
        report = json.loads(coop_status(home, door, "--json").stdout)
    # A refusal needs a person at once: it will not pass on its own.
    assert human.returncode == 1, human.stdout + human.stderr
    refused = [line for line in human.stdout.splitlines() if line.startswith("telegram refused")]
    assert len(refused) == 1, human.stdout
    assert words in refused[0]
    assert remedy in refused[0]
    problems = [line for line in human.stdout.splitlines() if "needs a person" in line]
    assert len(problems) == 1, human.stdout
    assert "Telegram" in problems[0]
    assert remedy in problems[0]
    refusal = report["door"]["telegram_queue"]["refusal"]
    assert refusal["kind"] == kind
    assert words in refusal["answer"]
    assert remedy in refusal["action"]
    assert report["problems"] == [problems[0].removeprefix("needs a person: ")]
    assert TOKEN not in human.stdout + json.dumps(report)


def test_a_wrong_bot_token_is_named_without_showing_the_token(home: Path) -> None:
    """No fault armed: the emulator refuses a token it does not know, as Telegram does (401)."""
    wrong = "654321:not-the-bots-token"
    with door_with_telegram(home, Clock(), [], door_token=wrong) as door:
        assert notify(door.socket_path, "1") in QUEUED
        queue = wait_until_sync(
            lambda: (queue := telegram_queue(door))["refusal"] and queue,
            what="the refusal in the door's status",
        )
        human = coop_status(home, door, "--check")
    assert queue["refusal"]["kind"] == "bad_token"
    assert human.returncode == 1, human.stdout + human.stderr
    assert "needs a person: Telegram refuses" in human.stdout
    assert "TELEGRAM_BOT_TOKEN" in human.stdout
    assert wrong not in human.stdout + json.dumps(queue)


def test_a_chief_only_install_is_not_a_telegram_outage(home: Path) -> None:
    """No Telegram configured: even an entry left in the Telegram queue by an earlier setup
    (it cannot ring, nothing will take it) is neither a failed check nor a metric to alert on."""

    async def leave_an_entry() -> None:
        config = ChiefConfig(db_path=home / "chief.db", owner="owner")
        async with Chief.open(config) as chief:
            await chief.queue_telegram("left from when Telegram was configured")

    anyio.run(leave_an_entry)
    clock = Clock()
    clock.offset = LONG_AGO
    with door_with_telegram(home, clock, [], telegram=False) as door:
        assert notify(door.socket_path, "1") in QUEUED
        result = coop_status(home, door, "--check")
        found = door_metrics(door)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "telegram: not configured" in result.stdout
    assert "needs a person" not in result.stdout
    assert found["coop_telegram_queue_depth"] == 0
    assert found["coop_telegram_queue_oldest_age_seconds"] == 0
