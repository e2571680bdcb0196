"""The tests' readers of another process's /proc entries, against a real process that opens and
closes a descriptor as fast as it can: a descriptor closed between the listing and the read is
skipped, never an error (a suite run failed on `FileNotFoundError: '/proc/PID/fd/18'` while
counting a live `coop serve`'s sockets; the same loop over the old inline readers failed 630
times in 3,000 readings)."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support.procs import fd_targets

READINGS = 3000
BOUND_S = 10.0
CHURN = """
import os, sys, time
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    os.close(os.open("/dev/null", os.O_RDONLY))
"""


def test_fd_targets_skips_a_descriptor_closed_while_it_reads() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", CHURN, str(BOUND_S)], stdout=subprocess.PIPE, text=True
    ) as churn:
        try:
            assert churn.stdout is not None
            assert churn.stdout.readline() == "ready\n"
            end = time.monotonic() + BOUND_S / 2
            readings = 0
            while readings < READINGS and time.monotonic() < end and churn.poll() is None:
                targets = fd_targets(churn.pid)
                assert any(target.startswith("pipe:[") for target in targets), targets
                readings += 1
            assert readings > 0
        finally:
            churn.kill()
