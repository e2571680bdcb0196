"""The disk-full fault mode the proof suite's disk test stands on, for both copies of the
contract (engine/faults.py and chief/faults.py): `name:raise` raises SQLite's own disk-full
error, `name:raise-while=PATH` only while PATH exists, and other names stay inert."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from chief import faults as chief_faults
from engine import faults as engine_faults

FAULTS = [engine_faults.fault, chief_faults.fault]


@pytest.mark.parametrize("fault", FAULTS)
def test_proof_fault_raise_mode_raises_disk_full(
    fault: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_TEST_FAULTS", "other.point, proof.write:raise")
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        fault("proof.write")
    fault("proof.elsewhere")  # not named: inert
    fault("proof")  # a prefix of a named point is not that point


@pytest.mark.parametrize("fault", FAULTS)
def test_proof_fault_raise_while_follows_the_flag_file(
    fault: Callable[[str], None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    flag = tmp_path / "disk-full"
    monkeypatch.setenv("COOP_TEST_FAULTS", f"proof.write:raise-while={flag}")
    fault("proof.write")  # no flag: the disk has space
    flag.touch()
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        fault("proof.write")
    flag.unlink()
    fault("proof.write")  # the space is back, without a restart
