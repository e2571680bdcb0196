"""The ledger's test fixture, shared by the integration and e2e ledger folders."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh ledger file; kicks off (these tests are about the ledger alone)."""
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_OWNER", "owner")
    monkeypatch.setenv("COOP_CHIEF_ACTOR", "chief")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)
    return str(tmp_path / "coop.db")
