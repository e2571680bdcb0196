"""Fault points for crash tests: inert unless COOP_TEST_FAULTS names them.

Same contract as engine/faults.py (chief must not import engine): `fault(name)` does nothing
unless the comma-separated env var COOP_TEST_FAULTS lists `name`. Each entry has a mode:

    name                   die at once with exit status 86, skipping every finally block and
                           flush, the way a power cut or SIGKILL would
    name:raise             raise `sqlite3.OperationalError("database or disk is full")` each time
                           the point is reached (a full disk under a write)
    name:raise-while=PATH  the same, but only while the file PATH exists: a test makes the disk
                           "full" by creating PATH and gives the space back by deleting it,
                           without restarting the process
"""

from __future__ import annotations

import os

FAULTS_ENV = "COOP_TEST_FAULTS"
FAULT_EXIT_STATUS = 86
# What SQLite itself says when a write meets ENOSPC (SQLITE_FULL).
DISK_FULL_MESSAGE = "database or disk is full"


def fault(name: str) -> None:
    """Die (os._exit(86)) or raise a disk-full error when COOP_TEST_FAULTS names this point."""
    entries = os.environ.get(FAULTS_ENV)
    # Read on every call (a dict lookup) so a test can arm a point without re-importing anything.
    if not entries or name not in entries:
        return
    for entry in entries.split(","):
        point, _, mode = entry.strip().partition(":")
        if point != name:
            continue
        if not mode:
            os._exit(FAULT_EXIT_STATUS)
        if mode == "raise" or (
            mode.startswith("raise-while=") and os.path.exists(mode.removeprefix("raise-while="))
        ):
            import sqlite3

            raise sqlite3.OperationalError(DISK_FULL_MESSAGE)
