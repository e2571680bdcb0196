"""A door with a bot token and no chat (neither TELEGRAM_CHAT_ID nor a pairing) starts: it says
`chief telegram pair` is the next step, lands reports in the Chief and rings nothing, and its
status and `coop status` say Telegram is not paired instead of failing. With a pairing file the
same door rings the paired chat. Real door app on uvicorn on its Unix socket (as `chief serve`
binds it), the emulator over loopback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from chief.telegram.emulator import EmulatorState, create_emulator
from chief.telegram.pairing import PAIRING_FILE_NAME, Pairing, write_pairing
from plumbing.unix import bind_private
from tests.support.asgi import serve_asgi_in_thread
from tests.support.door import BOT_TOKEN, door_env, key_headers, write_key
from tests.support.procs import coop, socket_client
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(60)

NOTIFY_PATH = "/api/coop/engine/notify"
STATUS_PATH = "/api/coop/engine/status"


@contextmanager
def door(home: Path) -> Iterator[tuple[str, EmulatorState]]:
    """The door with only a bot token (and whatever pairing `home` holds), on the emulator."""
    write_key(home)
    emulator_app, emulator = create_emulator(token=BOT_TOKEN)
    with serve_asgi_in_thread(emulator_app) as emulator_url:
        env = door_env(
            home,
            CHIEF_OWNER="owner",
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            TELEGRAM_API_BASE=emulator_url + "/bot",
        )
        config = DoorConfig.from_env(env)
        app = create_app(config, ChiefConfig.from_env(env))
        path = str(config.socket_path)
        with (
            contextlib.closing(bind_private(path)) as sock,
            serve_asgi_in_thread(app, lifespan="on", sock=sock),
        ):
            yield path, emulator


def notify(door: str, outbox_id: str) -> httpx.Response:
    with socket_client(door) as client:
        return client.post(
            NOTIFY_PATH,
            json={"text": f"row {outbox_id}", "kind": "todo.done", "outbox_id": outbox_id},
            headers=key_headers(),
        )


def door_status(door: str) -> dict[str, Any]:
    with socket_client(door) as client:
        answer = client.get(STATUS_PATH, headers=key_headers())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_a_token_alone_starts_the_door_which_says_to_pair_and_rings_nothing(
    tmp_path: Path,
) -> None:
    with capture_logs() as logs, door(tmp_path) as (door_sock, emulator):
        answer = notify(door_sock, "1")
        assert answer.status_code == 200, answer.text
        assert answer.json()["telegram"] == "not_configured"
        status = door_status(door_sock)
        env = {"COOP_HOME": str(tmp_path), "COOP_DOOR_SOCKET": door_sock, "COOP_KICK": "off"}
        made = coop(
            "todo", "add", "a ledger for status", "--as", "me", env=env
        )  # a read makes none
        assert made.returncode == 0, made.stderr
        result = coop("status", env=env)
    assert emulator.messages == []
    assert status["telegram_configured"] is False
    assert "chief telegram pair" in status["telegram_next_step"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "telegram: not paired" in result.stdout
    assert "chief telegram pair" in result.stdout
    unpaired = [entry for entry in logs if entry["event"] == "door.telegram_unpaired"]
    assert len(unpaired) == 1
    assert "chief telegram pair" in unpaired[0]["hint"]


def test_a_paired_door_rings_the_paired_chat(tmp_path: Path) -> None:
    write_pairing(
        tmp_path / PAIRING_FILE_NAME, Pairing(5151, 5151, "owner", "Owner", "@bot", "2026-12-01")
    )
    with door(tmp_path) as (door_sock, emulator):
        answer = notify(door_sock, "1")
        assert answer.status_code == 200, answer.text
        wait_until_sync(lambda: emulator.messages, timeout_s=10, what="the ring")
        status = door_status(door_sock)
    assert [(m["chat_id"], m["text"]) for m in emulator.messages] == [(5151, "row 1")]
    assert status["telegram_configured"] is True
    assert status["telegram_next_step"] is None
