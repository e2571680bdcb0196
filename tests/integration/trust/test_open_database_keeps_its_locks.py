"""Readying a database that this process already has open (a second connection: the door's, the
owner service's) drops none of the SQLite locks the first one holds. The kernel ties POSIX locks
to the process, and closing any descriptor of the file drops them all: a check that opened and
closed the database, its -wal or its -shm to look at it would leave the first connection
unlocked (seen as `chief report` told a second report "landed" instead of "already landed").
`plumbing.files.tighten` reaches the files by O_PATH descriptors, whose close drops nothing."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from chief.store import schema as chief_schema
from engine import store as engine_store
from plumbing import files


def my_posix_locks() -> list[str]:
    """This process's POSIX locks, as /proc/locks lists them (without the line number)."""
    pid = str(os.getpid())
    with open("/proc/locks", encoding="ascii") as listing:
        return sorted(
            line.split(":", 1)[1].strip()
            for line in listing
            if " POSIX " in line and line.split()[4] == pid
        )


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="/proc/locks lists the locks")
@pytest.mark.parametrize(
    "ready",
    [files.private_database, engine_store.open_connection, chief_schema.connect],
    ids=["private_database", "the ledger's opener", "chief.db's opener"],
)
def test_readying_an_open_database_again_drops_none_of_its_locks(
    tmp_path: Path, ready: Callable[[Path], object]
) -> None:
    path = tmp_path / "data" / "held.db"
    first = engine_store.open_connection(path)
    try:
        first.execute("CREATE TABLE IF NOT EXISTS t (x)")
        first.execute("INSERT INTO t VALUES (1)")
        first.execute("BEGIN")
        first.execute("SELECT count(*) FROM t").fetchone()  # a read snapshot: locks on -shm
        os.chmod(f"{path}-wal", 0o644)  # loose, as an older umask left it: tightened below
        held = my_posix_locks()
        assert held, "the reader holds no lock: nothing to check"

        second = ready(path)
        if isinstance(second, sqlite3.Connection):
            second.close()  # SQLite defers its own closes while another connection holds locks

        assert my_posix_locks() == held
        assert os.stat(f"{path}-wal").st_mode & 0o777 == 0o600
    finally:
        first.close()
