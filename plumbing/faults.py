"""Test-only crash points, compiled in and inert unless `COOP_TEST_FAULTS` names them.

A crash test sets `COOP_TEST_FAULTS=engine.outbox.after_insert` (comma-separated names, the
Chief's as well: `door.after_report`) in a child process's environment; when that process
reaches the named point it dies at once, as a power cut or SIGKILL would, skipping every finally
block and flush. Each entry has a mode:

    name                   die at once with exit status 86
    name:raise             raise `sqlite3.OperationalError("database or disk is full")` each time
    name:raise-while=PATH  the same, only while the file PATH exists (the disk fills and empties
                           under a running process)
    name:pause-while=PATH  stop right here while the file PATH exists (at most a minute),
                           after creating PATH.reached: a test holds a process at a seam, acts,
                           then lets it go on by deleting PATH

One grammar for the engine, the notifier and the Chief. Standard library only (sqlite3 and time
imported when a point fires): the `coop` CLI's cold path loads it.
"""

from __future__ import annotations

import os

FAULTS_ENV = "COOP_TEST_FAULTS"
FAULT_EXIT_STATUS = 86
# What SQLite itself says when a write meets ENOSPC (SQLITE_FULL).
DISK_FULL_MESSAGE = "database or disk is full"
PAUSE_MAX_S = 60.0
PAUSE_POLL_S = 0.005


def fault(name: str) -> None:
    """Die here with status 86, or raise a disk-full error, if the environment names this point."""
    entries = os.environ.get(FAULTS_ENV)
    if not entries or name not in entries:
        return
    for entry in entries.split(","):
        point, _, mode = entry.strip().partition(":")
        if point != name:
            continue
        if not mode:
            os._exit(FAULT_EXIT_STATUS)
        if mode.startswith("pause-while="):
            _pause_while(mode.removeprefix("pause-while="))
            continue
        if mode == "raise" or (
            mode.startswith("raise-while=") and os.path.exists(mode.removeprefix("raise-while="))
        ):
            import sqlite3

            raise sqlite3.OperationalError(DISK_FULL_MESSAGE)


def _pause_while(path: str) -> None:
    import time

    if not os.path.exists(path):
        return
    with open(path + ".reached", "a"):
        pass
    deadline = time.monotonic() + PAUSE_MAX_S
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(PAUSE_POLL_S)
