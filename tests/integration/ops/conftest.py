"""The operator's tests share one data folder layout: COOP_HOME in a temporary folder, kicks
off, no inherited paths, and the service key the door and `coop status` read; `door_on_socket`
serves a door app where `coop status` reaches it, on a Unix socket bound as `chief serve` binds
it."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.types import ASGIApp

from plumbing.unix import bind_private
from plumbing.wire import NOTIFY_PATH, SERVICE_KEY_HEADER
from tests.support.asgi import serve_asgi_in_thread
from tests.support.ledger import made_ledger  # noqa: F401 (the ops tests import it from here)
from tests.support.procs import socket_client, write_key

KEY = "status-test-key-0123456789"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_KICK", "off")
    for name in ("COOP_DB", "COOP_OWNER_FILE", "COOP_DOOR_SOCKET", "CHIEF_DB"):
        monkeypatch.delenv(name, raising=False)
    write_key(tmp_path / "service.key", KEY)
    return tmp_path


@contextlib.contextmanager
def door_on_socket(app: ASGIApp, path: Path, *, lifespan: str = "auto") -> Iterator[str]:
    """Serve the door `app` on a Unix socket at `path` (0600, in a private folder); yield the
    socket's path. The socket file is removed after."""
    sock = bind_private(str(path))
    try:
        with serve_asgi_in_thread(app, lifespan=lifespan, sock=sock):
            yield str(path)
    finally:
        sock.close()
        path.unlink(missing_ok=True)


def closed_socket(path: Path) -> str:
    """A socket file at `path` that nobody holds (connections refused): a door that is down."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
    return str(path)


def notify(socket_path: str, outbox_id: str) -> str:
    """One row through the door on `socket_path` (as the notifier posts it), accepted; what the
    door said of Telegram (`queued`, `sent`, `not_configured`)."""
    with socket_client(socket_path) as client:
        answer = client.post(
            NOTIFY_PATH,
            json={"text": f"row {outbox_id}", "kind": "todo.done", "outbox_id": outbox_id},
            headers={SERVICE_KEY_HEADER: KEY},
        )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["telegram"])
