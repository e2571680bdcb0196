"""What the owner and an operator are told of the Telegram setup and of the Bot API's own words,
against the real door (`chief serve`'s app on its Unix socket, its phone polling) and the Bot API
emulator, read the way a person reads them: `coop status` (a real CLI process), the phone's
`/quiet` and `/status` (played through the emulator), and the door's `door.started` line.

- Quiet hours (TELEGRAM_QUIET_HOURS) are named, with whether they hold now, by `/quiet`,
  `/status`, `coop status` and `door.started`.
- A poll conflict (another reader of the bot's updates, or a webhook set for the bot) is in
  `coop status` until it ends; the webhook's names `deleteWebhook`, the Bot API's own fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from structlog.testing import capture_logs

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from chief.telegram.emulator import EmulatorState, create_emulator
from tests.integration.ops.conftest import KEY, door_on_socket
from tests.support.asgi import serve_asgi_in_thread
from tests.support.phone import EmulatorOwner
from tests.support.procs import coop, socket_client

pytestmark = pytest.mark.timeout(90)

TOKEN = "123456:botapi-token"
OWNER_CHAT = 4242  # a private chat: its id is its user's, the obeyed user


@dataclass
class Door:
    """The door under test (its socket and app) and the emulator it rings."""

    socket_path: str
    app: FastAPI
    emulator: EmulatorState
    emulator_url: str


@contextmanager
def door_on_emulator(home: Path, **settings: str) -> Iterator[Door]:
    """The door (`create_app`, as `chief serve` builds it) on its socket, ringing the emulator's
    chat 4242 (`TELEGRAM_CHAT_ID` unless `settings` says otherwise), with `settings` added."""
    emulator_app, emulator = create_emulator(token=TOKEN)
    with serve_asgi_in_thread(emulator_app) as emulator_url:
        env = {
            "COOP_HOME": str(home),
            "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
            "CHIEF_OWNER": "owner",
            "CHIEF_METRICS_PORT": "off",
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_CHAT_ID": str(OWNER_CHAT),
            "TELEGRAM_API_BASE": emulator_url + "/bot",
        }
        env.update(settings)
        env = {name: value for name, value in env.items() if value}
        config = DoorConfig.from_env(env)
        app = create_app(config, ChiefConfig.from_env(env))
        with door_on_socket(app, home / "door.sock") as path:
            yield Door(path, app, emulator, emulator_url)


def door_status(door: Door) -> dict[str, Any]:
    with socket_client(door.socket_path) as client:
        answer = client.get("/api/coop/engine/status", headers={"X-Coop-Service-Key": KEY})
    assert answer.status_code == 200, answer.text
    status: dict[str, Any] = answer.json()
    return status


def coop_status(home: Path, door: Door, *args: str) -> Any:
    return coop("status", *args, env={"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door.socket_path})


def ask_the_phone(door: Door, text: str) -> str:
    """Send `text` from the owner's chat; the bot's answer in that chat."""
    with EmulatorOwner(door.emulator_url) as owner:
        before = len(owner.messages())
        owner.text(OWNER_CHAT, OWNER_CHAT, text)
        answers = owner.wait_for(
            lambda o: [m for m in o.messages()[before:] if m["chat_id"] == OWNER_CHAT],
            timeout_s=30,
            what=f"the door's answer to {text}",
        )
    return str(answers[0]["text"])


def window_around(now: datetime, *, in_force: bool) -> str:
    """A quiet-hours window (UTC) that holds `now`, or one that starts two hours later."""
    start = now - timedelta(hours=1) if in_force else now + timedelta(hours=2)
    return f"{start:%H:00}-{start + timedelta(hours=3):%H:00}"


@pytest.mark.parametrize("in_force", [True, False], ids=["in-force", "not-now"])
def test_quiet_hours_are_named_by_quiet_status_coop_status_and_door_started(
    home: Path, in_force: bool
) -> None:
    window = window_around(datetime.now(UTC), in_force=in_force)
    now_words = "in force now" if in_force else "not in force now"
    with (
        capture_logs() as logs,
        door_on_emulator(home, TELEGRAM_QUIET_HOURS=window, TELEGRAM_QUIET_TZ="UTC") as door,
    ):
        quiet = ask_the_phone(door, "/quiet")
        status = ask_the_phone(door, "/status")
        quiet_off = ask_the_phone(door, "/quiet off")
        human = coop_status(home, door)
        report = json.loads(coop_status(home, door, "--json").stdout)
    named = f"{window} (UTC)"
    assert named in quiet, quiet
    assert now_words in quiet, quiet
    assert "quiet hours aside" not in quiet + quiet_off
    assert named in quiet_off, quiet_off
    assert now_words in quiet_off.replace("are in force now", "in force now"), quiet_off
    (line,) = [line for line in status.splitlines() if line.startswith("Quiet hours")]
    assert named in line, status
    assert now_words in line, status
    (line,) = [line for line in human.stdout.splitlines() if "quiet hours" in line]
    assert line.startswith(f"telegram quiet hours: {named}, {now_words}"), human.stdout
    assert report["door"]["telegram_quiet_hours"] == {
        "window": window,
        "zone": "UTC",
        "in_force": in_force,
    }
    (started,) = [entry for entry in logs if entry["event"] == "door.started"]
    assert started["quiet_hours"] == window, started
    assert started["quiet_hours_zone"] == "UTC"
    assert started["quiet_hours_in_force"] is in_force


def test_without_quiet_hours_nothing_names_them(home: Path) -> None:
    with capture_logs() as logs, door_on_emulator(home) as door:
        quiet = ask_the_phone(door, "/quiet")
        human = coop_status(home, door)
    assert quiet == "Quiet is off: messages ring as usual."
    assert "quiet hours" not in human.stdout
    (started,) = [entry for entry in logs if entry["event"] == "door.started"]
    assert started["quiet_hours"] == "off"
