"""plumbing.faults, the crash points' one grammar (`COOP_TEST_FAULTS`) for every process:

- an unnamed point does nothing (nor does a prefix of a named one), a named one dies with
  status 86 at once (a real child process);
- `raise` raises SQLite's own disk-full error, `raise-while=PATH` only while PATH exists;
- `pause-while=PATH` holds the process while PATH exists, after creating `PATH.reached`.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from plumbing.faults import FAULT_EXIT_STATUS, fault
from tests.support.procs import clean_env
from tests.support.waiting import wait_until_sync

PAUSE_WAIT_S = 5.0
CHILD_TIMEOUT_S = 30.0
SCRIPT = "from plumbing.faults import fault; fault('chief.x'); print('survived')"


def test_an_unnamed_point_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)
    fault("chief.report.after_insert")
    monkeypatch.setenv("COOP_TEST_FAULTS", "engine.other, chief.report.after_insertX")
    fault("chief.report.after_insert")
    monkeypatch.setenv("COOP_TEST_FAULTS", "other.point, proof.write:raise")
    fault("proof")  # a prefix of a named point is not that point
    fault("proof.elsewhere")


@pytest.mark.parametrize(("armed", "status"), [("a, chief.x ,b", FAULT_EXIT_STATUS), ("", 0)])
def test_a_named_point_dies_with_status_86_at_once(armed: str, status: int) -> None:
    child = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=clean_env(COOP_TEST_FAULTS=armed),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert (child.returncode, child.stdout) == (status, "" if status else "survived\n")


def test_raise_and_raise_while(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    full = tmp_path / "full"
    monkeypatch.setenv("COOP_TEST_FAULTS", f"always:raise, sometimes:raise-while={full}")
    with pytest.raises(sqlite3.OperationalError, match=r"^database or disk is full$"):
        fault("always")
    fault("sometimes")  # PATH absent: the disk has room
    full.touch()
    with pytest.raises(sqlite3.OperationalError, match=r"^database or disk is full$"):
        fault("sometimes")
    full.unlink()
    fault("sometimes")  # the space is back, without a restart


def test_pause_while_holds_the_caller_until_the_file_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    reached = tmp_path / "hold.reached"
    monkeypatch.setenv("COOP_TEST_FAULTS", f"seam:pause-while={hold}")
    fault("seam")  # PATH absent: no pause, nothing created
    assert not reached.exists()

    hold.touch()
    passed = threading.Event()

    def at_the_seam() -> None:
        fault("seam")
        passed.set()

    caller = threading.Thread(target=at_the_seam, daemon=True)
    caller.start()
    try:
        wait_until_sync(reached.exists, timeout_s=PAUSE_WAIT_S, what="PATH.reached")
        assert not passed.is_set()
    finally:
        hold.unlink()
    assert passed.wait(PAUSE_WAIT_S)
    caller.join(PAUSE_WAIT_S)
