"""A process killed after the outbox insert and before landing loses nothing: the next start's
resume_reports() lands the line exactly once. Real subprocesses, real SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from chief.config import ChiefConfig
from chief.conversation import Chief
from plumbing.faults import FAULT_EXIT_STATUS
from tests.support.waiting import wait_until_sync

REPO_ROOT = Path(__file__).resolve().parents[3]
OWNER = "owner"
SOURCE = "coop-notify:41"
KEY = "chief-report:" + SOURCE
CHILD_TIMEOUT_S = 30.0


def _spawn(db_path: Path, *args: str, faults: str = "") -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "CHIEF_DB": str(db_path),
        "CHIEF_OWNER": OWNER,
        "COOP_TEST_FAULTS": faults,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.chief.chief_reporter", SOURCE, "todo #41 done", *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _query(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if not db_path.exists():
        return []
    with closing(sqlite3.connect(db_path, timeout=5.0)) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # the child has not migrated the file yet
            return []


def _outbox(db_path: Path) -> list[tuple[Any, ...]]:
    return _query(db_path, "SELECT source_key, message_id FROM chief_report_outbox")


async def _restart_and_check_landed_once(db_path: Path) -> None:
    config = ChiefConfig(db_path=db_path, owner=OWNER)
    async with Chief.open(config) as chief:  # open() runs resume_reports()
        assert await chief.undelivered_count() == 0
        landed = await chief.report("todo #41 done", SOURCE, wait=0.0)
    async with Chief.open(config) as chief:  # a second restart lands nothing more
        assert await chief.report("todo #41 done", SOURCE, wait=0.0) == landed
    sql = "SELECT id, turn_kind, origin FROM messages WHERE external_request_id = ?"
    rows = _query(db_path, sql, (KEY,))
    assert rows == [(landed, "coop", "scheduled_task")]
    assert _query(db_path, "SELECT COUNT(*) FROM messages") == [(1,)]


async def test_sigkill_after_the_outbox_insert_lands_once_on_the_next_start(tmp_path: Path) -> None:
    db_path = tmp_path / "chief.db"
    child = _spawn(db_path, "--hold-turn")
    try:
        wait_until_sync(
            lambda: _outbox(db_path) or child.poll() is not None,
            timeout_s=CHILD_TIMEOUT_S,
            what="the child's outbox insert",
        )
        assert child.poll() is None, child.communicate()
        assert _outbox(db_path) == [(KEY, None)]  # committed, not landed
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=CHILD_TIMEOUT_S) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=CHILD_TIMEOUT_S)
    await _restart_and_check_landed_once(db_path)


async def test_dying_at_the_after_insert_fault_point_lands_once_on_the_next_start(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "chief.db"
    child = _spawn(db_path, faults="chief.report.after_insert")
    _, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    assert child.returncode == FAULT_EXIT_STATUS, err
    assert _outbox(db_path) == [(KEY, None)]
    await _restart_and_check_landed_once(db_path)


def test_chief_log_runs_as_a_real_process(tmp_path: Path) -> None:
    db_path = tmp_path / "chief.db"
    child = _spawn(db_path)
    _, err = child.communicate(timeout=CHILD_TIMEOUT_S)
    assert child.returncode == 0, err
    done = subprocess.run(
        [sys.executable, "-m", "chief", "log"],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "CHIEF_DB": str(db_path),
            "CHIEF_OWNER": OWNER,
        },
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[coop]" in done.stdout
    assert "todo #41 done" in done.stdout
