"""`live`: one standalone door app (`create_app`, lifespan and all) per test module, served by a
real uvicorn in a background thread, on loopback TCP (as a host application may mount it: the
guard's peer and Host checks apply there) and on the door's Unix socket (`socket_path`, as
`chief serve` serves it: where the notifier reaches it), with the Bot API emulator in another
thread; tests speak plain HTTP to it and read chief.db with a second connection, as an operator
would."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.door.verbs import DoorVerbs
from chief.serve import create_app
from chief.telegram.emulator import EmulatorState, create_emulator
from plumbing.unix import bind_private
from plumbing.wire import NOTIFY_BATCH_PATH, NOTIFY_PATH, STATUS_PATH
from tests.support.asgi import serve_asgi_in_thread
from tests.support.door import (
    BOT_TOKEN,
    CHAT_ID,
    OWNER,
    door_env,
    key_headers,
    write_key,
)
from tests.support.waiting import wait_until_sync


@dataclass
class LiveDoor:
    url: str
    client: httpx.Client
    service: DoorVerbs
    emulator: EmulatorState
    emulator_url: str
    db_path: Path
    posture_path: Path
    openapi: dict[str, Any]
    socket_path: str = ""  # the same app on the door's socket, <folder>/door.sock

    def notify(self, document: object, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.client.post(
            self.url + NOTIFY_PATH,
            json=document,
            headers=key_headers() if headers is None else headers,
        )

    def post_raw(
        self, content: bytes, headers: dict[str, str] | None = None, path: str = NOTIFY_PATH
    ) -> httpx.Response:
        return self.client.post(
            self.url + path,
            content=content,
            headers=key_headers() if headers is None else headers,
        )

    def notify_batch(
        self, document: object, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        return self.client.post(
            self.url + NOTIFY_BATCH_PATH,
            json=document,
            headers=key_headers() if headers is None else headers,
        )

    def status(self) -> dict[str, object]:
        response = self.client.get(self.url + STATUS_PATH, headers=key_headers())
        assert response.status_code == 200, response.text
        return response.json()

    def _scalar(self, sql: str, *params: object) -> int:
        with sqlite3.connect(self.db_path) as conn:
            return int(conn.execute(sql, params).fetchone()[0])

    def rung(self, text: str) -> int:
        """How many times `text` reached Telegram, alone or inside a digest."""
        return sum(message.count(text) for message in self.emulator.texts())

    def wait_rung(self, text: str, times: int = 1, timeout_s: float = 10.0) -> None:
        wait_until_sync(
            lambda: self.rung(text) >= times, timeout_s=timeout_s, what=f"{text!r} rung {times}x"
        )

    def wait_marked(self, outbox_id: str, timeout_s: float = 10.0) -> None:
        """Wait until the row's sent mark is written (it follows Telegram's receipt)."""
        sql = "SELECT COUNT(*) FROM coop_notify_sent WHERE outbox_id = ?"
        wait_until_sync(
            lambda: self._scalar(sql, outbox_id) == 1, timeout_s=timeout_s, what="the mark"
        )

    def chief_lines(self, outbox_id: str) -> int:
        return self._scalar(
            "SELECT COUNT(*) FROM messages WHERE external_request_id = ?",
            "chief-report:coop-notify:" + outbox_id,
        )

    def written(self) -> tuple[int, int, int, int]:
        """Everything the door can write: Telegram messages, Chief messages, queued reports,
        sent marks. Read once the Telegram queue has drained: an earlier test's row rings when
        the pacing allows (a token every 1.1 s), and must not count as written by this one. An
        entry a refused request queued by mistake still shows: it rings, and is counted."""
        wait_until_sync(
            lambda: (
                self._scalar("SELECT COUNT(*) FROM telegram_queue") == 0
                and self.service.ringer is not None
                and self.service.ringer.unmarked is None
            ),
            timeout_s=15,
            what="the door's Telegram queue to drain",
        )
        return (
            len(self.emulator.messages),
            self._scalar("SELECT COUNT(*) FROM messages"),
            self._scalar("SELECT COUNT(*) FROM chief_report_outbox"),
            self._scalar("SELECT COUNT(*) FROM coop_notify_sent"),
        )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDoor]:
    folder = tmp_path_factory.mktemp("door")
    write_key(folder)
    posture = folder / "posture.json"
    posture.write_text('{"state": "normal"}')
    emulator_app, emulator = create_emulator(token=BOT_TOKEN)
    with serve_asgi_in_thread(emulator_app) as emulator_url:
        config = DoorConfig.from_env(
            door_env(
                folder,
                CHIEF_POSTURE_FILE=str(posture),
                TELEGRAM_BOT_TOKEN=BOT_TOKEN,
                TELEGRAM_CHAT_ID=CHAT_ID,
                TELEGRAM_API_BASE=emulator_url + "/bot",
                TELEGRAM_TIMEOUT_S="1",
            )
        )
        db_path = folder / "chief.db"
        app = create_app(config, ChiefConfig(db_path=db_path, owner=OWNER))
        sock = bind_private(str(config.socket_path))
        with (
            contextlib.closing(sock),
            serve_asgi_in_thread(app, lifespan="on") as url,
            serve_asgi_in_thread(app, lifespan="off", sock=sock),  # one lifespan: the TCP one's
            httpx.Client(timeout=10.0) as client,
        ):
            yield LiveDoor(
                url,
                client,
                app.state.door,
                emulator,
                emulator_url,
                db_path,
                posture,
                app.openapi(),
                str(config.socket_path),
            )


@pytest.fixture
def door(live: LiveDoor) -> Iterator[LiveDoor]:
    """The module's door, with the posture and the emulator's faults put back after the test."""
    yield live
    live.posture_path.write_text('{"state": "normal"}')
    live.emulator.faults.clear()
