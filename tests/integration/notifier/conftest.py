"""Fixtures for the notifier's integration tests: a real ledger file, a key file, a config."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import store as engine_store


@pytest.fixture(autouse=True)
def _no_spawned_drainers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Library verbs kick after their commit; here the test drives the worker itself."""
    monkeypatch.setenv("COOP_KICK", "off")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "coop.db"
    engine_store.open_connection(path).close()
    return path


@pytest.fixture
def conn(db_path: Path) -> Iterator[sqlite3.Connection]:
    connection = engine_store.open_connection(db_path)
    yield connection
    connection.close()
