"""fault(name): inert unless COOP_TEST_FAULTS names it, then the process dies with status 86."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chief.faults import FAULT_EXIT_STATUS, fault

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = "from chief.faults import fault; fault('chief.x'); print('survived')"


def test_a_fault_point_is_inert_when_not_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)
    fault("chief.report.after_insert")
    monkeypatch.setenv("COOP_TEST_FAULTS", "engine.other, chief.report.after_insertX")
    fault("chief.report.after_insert")


@pytest.mark.parametrize(("armed", "status"), [("a, chief.x ,b", FAULT_EXIT_STATUS), ("", 0)])
def test_a_named_fault_point_exits_86_at_once(armed: str, status: int) -> None:
    env = {**os.environ, "COOP_TEST_FAULTS": armed, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == status
    assert ("survived" in done.stdout) == (status == 0)
