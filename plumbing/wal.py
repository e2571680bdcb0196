"""A fresh SQLite file switched to WAL while another process may be opening it at the same
instant: the ledger's opener (`engine.store`) and chief.db's (`chief.store.schema`) both call
`enter_wal`. Standard library only: the `coop` CLI's cold path loads it.
"""

from __future__ import annotations

import sqlite3
import time

#: The first pause before asking again, doubled up to the longest: the other opener is
#: mid-switch for a few milliseconds.
FIRST_PAUSE_S = 0.001
LONGEST_PAUSE_S = 0.05


def enter_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """`PRAGMA journal_mode = WAL`, asked again while another opener holds the file, up to
    `timeout_s`; the journal mode it answers. Switching a fresh file to WAL takes an exclusive
    lock, and SQLite refuses a second opener at the same instant ("database is locked") at once,
    without its busy handler (two connections each holding SHARED and asking for EXCLUSIVE would
    deadlock). Any other error, or "locked" past the timeout, is raised as sqlite3 raised it."""
    deadline = time.monotonic() + timeout_s
    pause_s = FIRST_PAUSE_S
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(mode)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)  # on the caller's own thread (the store's, for chief.db)
        pause_s = min(pause_s * 2, LONGEST_PAUSE_S)
