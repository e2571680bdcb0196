"""Real `chief serve` processes (python -m chief serve, from the venv) against the Bot API
emulator running in the test process; chief.db read with a second connection."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from chief.telegram.emulator import EmulatorState, create_emulator
from tests.support import procs
from tests.support.asgi import serve_asgi_in_thread
from tests.support.door import BOT_TOKEN, CHAT_ID, OWNER, key_headers, write_key
from tests.support.procs import Service

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
NOTIFY_URL = "/api/coop/engine/notify"
NOTIFY_BATCH_URL = "/api/coop/engine/notify-batch"
STATUS_URL = "/api/coop/engine/status"


class DoorProcess(Service):
    """One `python -m chief serve` child; its output is logged under `<COOP_HOME>/logs/`."""

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self.popen is not None, f"{self.name} is not running"
        return self.popen

    def stderr(self) -> str:
        return self.log()

    def metrics_base(self) -> str:
        """`http://127.0.0.1:PORT` where this start serves `/metrics` (CHIEF_METRICS_PORT)."""
        port = int(self.wait_event("door.metrics_listening", "the door's /metrics")["port"])
        return f"http://127.0.0.1:{port}"

    def close(self) -> None:
        """Make sure the process is gone (killing it if a test left it running)."""
        if self.running:
            self.kill()


def clean_env(folder: Path, **settings: str) -> dict[str, str]:
    """The parent's environment without any Coop, Chief or Telegram setting, plus `settings`."""
    return procs.clean_env(
        folder, **({"CHIEF_OWNER": OWNER, "CHIEF_METRICS_PORT": "off"} | settings)
    )


_SPAWNED: list[DoorProcess] = []


def spawn_door(env: dict[str, str], *, wait_listening: bool = True) -> DoorProcess:
    door = DoorProcess(
        f"door-{len(_SPAWNED) + 1}",  # two doors in one test keep two logs
        ["chief", "serve"],
        Path(env["COOP_HOME"]),
        "door.listening",
        env,
        takes_port=False,
    )
    _SPAWNED.append(door)
    door.start(wait=wait_listening)
    return door


@dataclass
class Harness:
    folder: Path
    emulator: EmulatorState
    emulator_url: str
    client: httpx.Client

    def env(self, **settings: str) -> dict[str, str]:
        return clean_env(
            self.folder,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            TELEGRAM_CHAT_ID=CHAT_ID,
            TELEGRAM_API_BASE=self.emulator_url + "/bot",
            **settings,
        )

    def notify(self, door: DoorProcess, document: object) -> httpx.Response:
        with procs.socket_client(door.socket_path) as client:
            return client.post(NOTIFY_URL, json=document, headers=key_headers())

    def notify_batch(self, door: DoorProcess, document: object) -> httpx.Response:
        with procs.socket_client(door.socket_path) as client:
            return client.post(NOTIFY_BATCH_URL, json=document, headers=key_headers())

    def status(self, door: DoorProcess) -> dict[str, object]:
        with procs.socket_client(door.socket_path) as client:
            response = client.get(STATUS_URL, headers=key_headers())
        assert response.status_code == 200, response.text
        return response.json()

    def _scalar(self, sql: str, *params: object) -> int:
        with sqlite3.connect(self.folder / "chief.db") as conn:
            return int(conn.execute(sql, params).fetchone()[0])

    def chief_lines(self, outbox_id: str) -> int:
        return self._scalar(
            "SELECT COUNT(*) FROM messages WHERE external_request_id = ?",
            "chief-report:coop-notify:" + outbox_id,
        )

    def sent_marks(self, outbox_id: str) -> int:
        return self._scalar("SELECT COUNT(*) FROM coop_notify_sent WHERE outbox_id = ?", outbox_id)


@pytest.fixture(scope="module")
def emulator() -> Iterator[tuple[EmulatorState, str]]:
    app, state = create_emulator(token=BOT_TOKEN)
    with serve_asgi_in_thread(app) as url:
        yield state, url


@pytest.fixture
def harness(tmp_path: Path, emulator: tuple[EmulatorState, str]) -> Iterator[Harness]:
    state, url = emulator
    state.reset()
    write_key(tmp_path)
    try:
        with httpx.Client(timeout=10.0) as client:
            yield Harness(tmp_path, state, url, client)
    finally:
        while _SPAWNED:
            _SPAWNED.pop().close()
        state.reset()
