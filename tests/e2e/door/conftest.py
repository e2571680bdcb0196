"""Real `chief serve` processes (python -m chief serve, from the venv) against the Bot API
emulator running in the test process; chief.db read with a second connection."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from chief.telegram.emulator import EmulatorState, create_emulator
from tests.integration.door.door_env import BOT_TOKEN, CHAT_ID, OWNER, key_headers, write_key
from tests.support.asgi import serve_asgi_in_thread
from tests.support.waiting import wait_until_sync

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
NOTIFY_URL = "/api/coop/engine/notify"
NOTIFY_BATCH_URL = "/api/coop/engine/notify-batch"
STATUS_URL = "/api/coop/engine/status"


@dataclass
class DoorProcess:
    proc: subprocess.Popen[bytes]
    lines: list[str] = field(default_factory=list)
    port: int | None = None
    pump: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self, name: str) -> list[dict[str, object]]:
        found = []
        for line in list(self.lines):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("event") == name:
                found.append(entry)
        return found

    def stderr(self) -> str:
        return "".join(self.lines)

    def terminate(self) -> int:
        """SIGTERM, and the exit status once it stopped (bounded)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(STOP_TIMEOUT_S)

    def close(self) -> None:
        """Make sure the process is gone and its pipe closed (killing it if a test left it)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(STOP_TIMEOUT_S)
        if self.pump is not None:
            self.pump.join(STOP_TIMEOUT_S)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def clean_env(folder: Path, **settings: str) -> dict[str, str]:
    """The parent's environment without any Coop, Chief or Telegram setting, plus `settings`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("COOP_", "CHIEF_", "TELEGRAM_", "PTB_"))
    }
    env |= {
        "COOP_HOME": str(folder),
        "CHIEF_OWNER": OWNER,
        "CHIEF_PORT": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env |= settings
    return env


_SPAWNED: list[DoorProcess] = []


def spawn_door(env: dict[str, str], *, wait_listening: bool = True) -> DoorProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "chief", "serve"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    door = DoorProcess(proc)

    def pump() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            door.lines.append(raw.decode("utf-8", "replace"))

    door.pump = threading.Thread(target=pump, name="door-stderr", daemon=True)
    door.pump.start()
    _SPAWNED.append(door)
    if wait_listening:
        wait_until_sync(
            lambda: door.events("door.listening") or proc.poll() is not None,
            timeout_s=START_TIMEOUT_S,
            what="chief serve to listen",
        )
        listening = door.events("door.listening")
        if not listening:
            raise AssertionError(f"chief serve did not start:\n{door.stderr()}")
        door.port = int(listening[0]["port"])  # type: ignore[arg-type]
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
        return self.client.post(door.url + NOTIFY_URL, json=document, headers=key_headers())

    def notify_batch(self, door: DoorProcess, document: object) -> httpx.Response:
        return self.client.post(door.url + NOTIFY_BATCH_URL, json=document, headers=key_headers())

    def status(self, door: DoorProcess) -> dict[str, object]:
        response = self.client.get(door.url + STATUS_URL, headers=key_headers())
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
