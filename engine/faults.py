"""Test-only crash points, compiled in and inert unless `COOP_TEST_FAULTS` names them.

A crash test sets `COOP_TEST_FAULTS=engine.outbox.after_insert` (comma-separated names) in a
child process's environment; when that process reaches the named point it dies at once, as a
power cut or SIGKILL would, without unwinding or committing anything.
"""

from __future__ import annotations

import os

FAULTS_ENV = "COOP_TEST_FAULTS"
FAULT_EXIT_STATUS = 86


def fault(name: str) -> None:
    """Die here with status 86 if the test-only environment variable names this point."""
    named = os.environ.get(FAULTS_ENV)
    if named and name in named.split(","):
        os._exit(FAULT_EXIT_STATUS)
