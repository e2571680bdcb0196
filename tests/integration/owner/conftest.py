from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from engine.owner import cutover
from engine.owner.app import Owner, create_app
from tests.support.asgi import serve_asgi_in_thread


@dataclass
class RunningOwner:
    url: str
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
    """The owner's app on a real uvicorn (loopback, port 0), after a real cutover to it."""
    db = (home / "coop.db").resolve()
    service = Owner(db)
    service.connect().close()
    kicks: list[int] = []
    app = create_app(service, kick=lambda: kicks.append(1))
    with serve_asgi_in_thread(app, lifespan="off") as url:
        cutover.cutover(url, actor="operator", db=db)
        yield RunningOwner(url=url, db=db, home=home, service=service, kicks=kicks)
    service.close()
