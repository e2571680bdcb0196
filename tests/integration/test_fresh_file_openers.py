"""Several processes opening one fresh database file at the same instant (the door and a cron
`chief report` on a new chief.db; two `coop` verbs on a new coop.db) all open it.

Switching a fresh file to WAL takes an exclusive lock, and SQLite answers a second connection
that asks at the same time "database is locked" at once, without its busy handler: two
connections holding SHARED and each asking for EXCLUSIVE would deadlock. Measured with four
threads released by one barrier: 78 of 300 rounds had an opener refused. Threads stand in for
processes here: each opener has its own connection, and the lock is the file's."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from chief.store import schema as chief_schema
from engine import store as engine_store

OPENERS = 4
ROUNDS = 40  # a refused opener in ~1 round of 4 before the fix: 40 rounds miss it ~1e-5 of runs


def _open_engine(path: Path) -> None:
    engine_store.open_connection(path).close()


def _open_chief(path: Path) -> None:
    conn = chief_schema.connect(path)
    try:
        chief_schema.prepare(conn, path)
    finally:
        conn.close()


def _race(opener: Callable[[Path], None], path: Path) -> list[Exception]:
    """`OPENERS` threads released by one barrier, each opening `path`; what they raised."""
    start = threading.Barrier(OPENERS)
    errors: list[Exception] = []

    def open_it() -> None:
        start.wait(timeout=10)
        try:
            opener(path)
        except Exception as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


@pytest.mark.parametrize("opener", [_open_engine, _open_chief], ids=["coop.db", "chief.db"])
def test_openers_of_one_fresh_file_at_the_same_instant_all_open_it(
    tmp_path: Path, opener: Callable[[Path], None]
) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"round{round_}" / "fresh.db"
        path.parent.mkdir()
        errors = _race(opener, path)
        assert errors == [], f"round {round_}: {errors[0]}"
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
