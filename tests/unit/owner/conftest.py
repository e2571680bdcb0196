from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data folder holding the ledger and the receipts; no kicks, no owner override."""
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_DB", str(tmp_path / "coop.db"))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)
    return tmp_path


def write_owner_file(path: Path, body: object) -> Path:
    path.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    path.chmod(0o600)  # as `coop cutover` writes it: a looser one is refused before it is read
    return path
