"""Fixtures for the chief integration tests: a real chief.db in tmp_path, read back with plain
sqlite3 (a second connection, as an operator would)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from chief.config import ChiefConfig

OWNER = "owner"


@pytest.fixture
def chief_config(tmp_path: Path) -> ChiefConfig:
    return ChiefConfig(db_path=tmp_path / "data" / "chief.db", owner=OWNER)


def query(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of `sql` read on a fresh connection of our own."""
    with closing(sqlite3.connect(db_path)) as conn:
        return conn.execute(sql, params).fetchall()


def execute(db_path: Path, sql: str) -> None:
    """One statement on a connection of our own (e.g. to install a failing trigger)."""
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute(sql)
        conn.commit()
