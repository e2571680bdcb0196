"""The serve lock's holders: a `chief report` landing its line is waited for (briefly) by a door
that starts meanwhile; any other holder is refused at once."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from chief.errors import DoorError
from chief.serve_lock import REPORT_HOLD_WAIT_S, REPORT_HOLDER, ServeLock


def test_a_door_waits_for_a_cron_landing_to_let_go(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"
    report = ServeLock(db, holder=REPORT_HOLDER)
    assert report.try_acquire()
    assert report.current_holder() == f"{os.getpid()} {REPORT_HOLDER}"
    letting_go = threading.Timer(0.2, report.release)
    letting_go.start()
    started = time.monotonic()
    try:
        with ServeLock(db) as door:
            assert time.monotonic() - started < REPORT_HOLD_WAIT_S
            assert door.current_holder() == f"{os.getpid()} chief serve"
    finally:
        letting_go.join()


def test_a_door_refuses_at_once_beside_another_holder(tmp_path: Path) -> None:
    db = tmp_path / "chief.db"
    with ServeLock(db, holder="my assistant"):
        started = time.monotonic()
        with pytest.raises(DoorError, match=f"pid {os.getpid()}"):
            ServeLock(db).acquire()
        assert time.monotonic() - started < 1.0
        assert not ServeLock(db, holder=REPORT_HOLDER).try_acquire()
