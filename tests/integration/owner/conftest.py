from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.owner import cutover
from engine.owner.app import Owner, create_app
from tests.support.asgi import serve_asgi_in_thread


@dataclass
class RunningOwner:
    socket: str
    db: Path
    home: Path
    service: Owner
    kicks: list[int] = field(default_factory=list)

    @property
    def owner_file(self) -> Path:
        return Path(str(self.db) + ".owner.json")

    def config(self) -> dict[str, Any]:
        return dict(json.loads(self.owner_file.read_text()))

    def credential(self) -> str:
        return Path(self.config()["credential_file"]).read_text().strip()

    def client(self, **options: Any) -> httpx.Client:
        """An HTTP client of the owner's socket (paths relative to it)."""
        transport = httpx.HTTPTransport(uds=self.socket)
        return httpx.Client(transport=transport, base_url="http://localhost", **options)

    def post(self, path: str, **options: Any) -> httpx.Response:
        with self.client() as client:
            return client.post(path, **options)

    def get(self, path: str, **options: Any) -> httpx.Response:
        with self.client() as client:
            return client.get(path, **options)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_DB", str(tmp_path / "coop.db"))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_OWNER", "owner")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)
    return tmp_path


@pytest.fixture
def running(home: Path) -> Iterator[RunningOwner]:
    """The owner's app on a real uvicorn (on its private socket in the test's folder), after a
    real cutover to it."""
    db = (home / "coop.db").resolve()
    service = Owner(db)
    service.connect().close()
    kicks: list[int] = []
    app = create_app(service, kick=lambda: kicks.append(1))
    with serve_asgi_in_thread(app, lifespan="off", uds=str(home / "service.sock")) as path:
        cutover.cutover(path, actor="operator", db=db)
        yield RunningOwner(socket=path, db=db, home=home, service=service, kicks=kicks)
    service.close()
