"""Fault points for crash tests: inert unless COOP_TEST_FAULTS names them.

Same contract as engine/faults.py (chief must not import engine): `fault(name)` does nothing
unless the comma-separated env var COOP_TEST_FAULTS lists `name`; then the process dies at once
with exit status 86, skipping every finally block and flush, the way a power cut or SIGKILL would.
"""

from __future__ import annotations

import os

FAULTS_ENV = "COOP_TEST_FAULTS"
FAULT_EXIT_STATUS = 86


def fault(name: str) -> None:
    """Die here (os._exit(86)) when COOP_TEST_FAULTS names this point; otherwise return."""
    names = os.environ.get(FAULTS_ENV)
    # Read on every call (a dict lookup) so a test can arm a point without re-importing anything.
    if names and name in {part.strip() for part in names.split(",")}:
        os._exit(FAULT_EXIT_STATUS)
