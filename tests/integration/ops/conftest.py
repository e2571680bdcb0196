"""The operator's tests share one data folder layout: COOP_HOME in a temporary folder, kicks
off, no inherited paths, and the service key the door and `coop status` read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.procs import write_key

KEY = "status-test-key-0123456789"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_KICK", "off")
    for name in ("COOP_DB", "COOP_OWNER_FILE", "COOP_DOOR_URL", "CHIEF_DB"):
        monkeypatch.delenv(name, raising=False)
    write_key(tmp_path / "service.key", KEY)
    return tmp_path
