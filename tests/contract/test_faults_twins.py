"""The fault-point twins: `engine.faults` and `chief.faults`.

chief must not import the engine, so each package keeps its own copy of the crash points' one
grammar (`COOP_TEST_FAULTS`). The two modules differ in their docstring only; the same checks
run on both, so a mode added to one and not the other fails here:

- an unnamed point does nothing, a named one dies with status 86 (a real child process);
- `raise` raises SQLite's own disk-full error, `raise-while=PATH` only while PATH exists;
- `pause-while=PATH` holds the process while PATH exists, after creating `PATH.reached`.
"""

from __future__ import annotations

import ast
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from chief import faults as chief_faults
from engine import faults as engine_faults
from tests.support.procs import clean_env
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[2]
TWINS: dict[str, ModuleType] = {"engine": engine_faults, "chief": chief_faults}
PAUSE_WAIT_S = 5.0
CHILD_TIMEOUT_S = 30.0


def code_without_docstring(path: Path) -> list[str]:
    """The module's statements as AST dumps, its docstring left out."""
    tree = ast.parse(path.read_text())
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [ast.dump(node) for node in body]


def test_the_two_modules_are_the_same_code() -> None:
    """The twins differ in their module docstring only (which names the other one)."""
    assert code_without_docstring(ROOT / "chief" / "faults.py") == code_without_docstring(
        ROOT / "engine" / "faults.py"
    )


@pytest.mark.parametrize("twin", TWINS)
def test_an_unnamed_point_does_nothing(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COOP_TEST_FAULTS", "other.point,other.point:raise")
    TWINS[twin].fault("this.point")


@pytest.mark.parametrize("twin", TWINS)
def test_a_named_point_dies_with_status_86(twin: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", f"from {twin}.faults import fault; fault('p'); print('alive')"],
        env=clean_env(COOP_TEST_FAULTS="p"),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert (child.returncode, child.stdout) == (86, "")


@pytest.mark.parametrize("twin", TWINS)
def test_raise_and_raise_while(twin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fault: Callable[[str], None] = TWINS[twin].fault
    full = tmp_path / "full"
    monkeypatch.setenv("COOP_TEST_FAULTS", f"always:raise,sometimes:raise-while={full}")
    with pytest.raises(sqlite3.OperationalError, match=r"^database or disk is full$"):
        fault("always")
    fault("sometimes")  # PATH absent: the disk has room
    full.touch()
    with pytest.raises(sqlite3.OperationalError, match=r"^database or disk is full$"):
        fault("sometimes")


@pytest.mark.parametrize("twin", TWINS)
def test_pause_while_holds_the_caller_until_the_file_goes(
    twin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault: Callable[[str], None] = TWINS[twin].fault
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
