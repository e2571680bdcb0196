"""The SQL of `coop backup` and `coop restore` (`engine.backup`): a database copied through
SQLite's online backup API, a copy checked and counted, and what a restore reads from both
files to say what it means (the highest ids, the pending rows, the worker lock's holder).

Plain connections to existing files (`mode=rw` never creates one), opened and closed per call:
these run once per command, beside the services, never inside a ledger transaction.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

SQLITE_TIMEOUT_S = 10.0
#: The tables whose highest id tells what a restore loses: written after the backup means a
#: higher id.
ID_TABLES = ("todos", "requests", "coop_outbox", "coop_events")

__all__ = ["checked_counts", "copy", "holder", "max_ids", "pending_count", "single_file"]


def _uri(path: str, mode: str) -> str:
    from urllib.parse import quote

    return f"file:{quote(os.path.abspath(path))}?mode={mode}"


@contextlib.contextmanager
def _open(path: str, mode: str = "rw") -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(_uri(path, mode), uri=True, timeout=SQLITE_TIMEOUT_S)
    try:
        yield conn
    finally:
        conn.close()


def copy(source: str, target: str) -> None:
    """`source` into `target` (created when missing) through the online backup API."""
    with _open(source) as src, _open(target, "rwc") as dst:
        src.backup(dst)


def single_file(path: str) -> None:
    """Make a copy one self-contained file: rollback journal, so no -wal stays beside it. (A
    restore makes the live ledger WAL again: the backup API writes a WAL destination's header
    as WAL.)"""
    with _open(path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")


def checked_counts(path: str) -> tuple[list[str], dict[str, int]]:
    """`PRAGMA integrity_check`'s answer (["ok"] when whole) and each table's row count."""
    with _open(path) as conn:
        verdict = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
        if verdict != ["ok"]:
            return verdict, {}
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        counts = {
            name: int(conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
            for name in tables
        }
        return verdict, counts


def max_ids(path: str) -> dict[str, int]:
    """The highest id of each of `ID_TABLES` (a table the file lacks is left out)."""
    found: dict[str, int] = {}
    if not os.path.isfile(path):
        return found
    with _open(path) as conn:
        for table in ID_TABLES:
            with contextlib.suppress(sqlite3.OperationalError):  # an older or empty ledger
                row = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
                found[table] = int(row[0])
    return found


def pending_count(path: str) -> int:
    """The outbox rows still pending in a ledger file."""
    with _open(path) as conn, contextlib.suppress(sqlite3.OperationalError):
        row = conn.execute("SELECT count(*) FROM coop_outbox WHERE state = 'pending'").fetchone()
        return int(row[0])
    return 0


def holder(path: str) -> tuple[int, str] | None:
    """The worker lock's holder in a ledger file: (pid, host), or None."""
    if not os.path.isfile(path):
        return None
    with _open(path) as conn, contextlib.suppress(sqlite3.OperationalError):
        row = conn.execute("SELECT pid, host FROM worker_lock").fetchone()
        return None if row is None else (int(row[0]), str(row[1]))
    return None
