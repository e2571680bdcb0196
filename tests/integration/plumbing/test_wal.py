"""plumbing.wal.enter_wal on real files: a file another connection holds is asked again until the
timeout, then refused as SQLite said it; a free one answers "wal"; any other error is raised at
once. That four openers of one fresh file at one instant all get in is
tests/integration/test_fresh_file_openers.py (the ledger's opener and chief.db's, both on it).
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from plumbing.wal import enter_wal

HELD_TIMEOUT_S = 0.05


def test_a_held_file_is_asked_again_until_the_timeout_then_free_it_enters_wal(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as holder:
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN EXCLUSIVE")
        # timeout=0: SQLite's own busy handler would wait; the switch to WAL is refused at once.
        with closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as opener:
            started = time.monotonic()
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                enter_wal(opener, HELD_TIMEOUT_S)
            assert time.monotonic() - started >= HELD_TIMEOUT_S / 2  # it asked again meanwhile
            holder.execute("COMMIT")
            assert enter_wal(opener, HELD_TIMEOUT_S) == "wal"


def test_any_other_error_is_raised_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    path.write_bytes(b"not a database, " * 64)
    with (
        closing(sqlite3.connect(path, isolation_level=None)) as conn,
        pytest.raises(sqlite3.DatabaseError, match="not a database"),
    ):
        enter_wal(conn, 30.0)
