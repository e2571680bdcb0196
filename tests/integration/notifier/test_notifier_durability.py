"""The notifier's delivery marks commit with synchronous=NORMAL in both of its homes: the
standalone daemon (`coop-notifier run`) and the one embedded in `coop serve` (docs/architecture.md,
"Durability"). With FULL every mark costs an fdatasync."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.owner.app import Owner
from notifier.daemon import Daemon
from notifier.service_parts import build_daemon

NORMAL = 1  # PRAGMA synchronous answers 1 for NORMAL, 2 for FULL


def _synchronous(conn: sqlite3.Connection) -> int:
    try:
        return int(conn.execute("PRAGMA synchronous").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    key = tmp_path / "service.key"
    key.write_text("k" * 32)
    key.chmod(0o600)
    db = tmp_path / "coop.db"
    monkeypatch.setenv("COOP_DB", str(db))
    monkeypatch.setenv("COOP_SERVICE_KEY_FILE", str(key))
    return db


def test_the_serve_daemon_marks_with_synchronous_normal(env: Path) -> None:
    owner = Owner(env)
    daemon = build_daemon(owner)
    assert _synchronous(daemon._connect()) == NORMAL
    # The owner's own compat connection keeps FULL: the ledger's changes are the promise.
    assert _synchronous(owner.connect()) == 2


def test_the_standalone_daemon_marks_with_synchronous_normal(env: Path) -> None:
    from notifier.config import NotifierConfig

    daemon = Daemon(NotifierConfig.from_env())
    assert _synchronous(daemon._connect()) == NORMAL
