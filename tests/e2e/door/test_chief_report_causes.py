"""`chief report` names the cause (issue 34): while a door holds the Chief, a command that cannot
hand it the line says why in one line, on stderr, and exits 1, the line kept durable: the key's
file and its mode, a key file that is not there, nothing listening at the socket it was told
to use (and which setting named it). "Busy" is said only when the Chief is busy (a turn in
progress: tests/e2e/door/test_chief_report_cron.py). Real processes: `chief serve` and the
command."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.door.conftest import Harness, spawn_door

pytestmark = pytest.mark.slow

COMMAND_TIMEOUT_S = 30.0
#: The command's own wait: long enough for a door that is starting, short for a test.
WAIT = "1"


def chief_report(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chief", "report", "--wait", WAIT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def queued(folder: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(folder / "chief.db") as conn:
        return conn.execute("SELECT source_key, message_id FROM chief_report_outbox").fetchall()


def assert_one_line_naming(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    [line] = lines
    for word in words:
        assert word in line, line
    assert "busy" not in line, line
    assert "Traceback" not in done.stderr
    return line


def test_a_key_others_can_read_is_named_with_its_mode(harness: Harness) -> None:
    door = spawn_door(harness.env())
    loose = harness.folder / "loose.key"
    shutil.copyfile(harness.folder / "service.key", loose)
    loose.chmod(0o644)
    env = harness.env(COOP_SERVICE_KEY_FILE=str(loose))
    done = chief_report(env, "--source", "cron:backup", "--fire", "1", "ok")
    assert_one_line_naming(done, str(loose), "0644", "chmod 600")
    assert queued(harness.folder) == [("chief-report:cron:backup:1", None)]  # kept, lands later
    assert door.terminate() == 0


def test_a_missing_key_is_named(harness: Harness) -> None:
    door = spawn_door(harness.env())
    missing = harness.folder / "no-such.key"
    done = chief_report(
        harness.env(COOP_SERVICE_KEY_FILE=str(missing)), "--source", "cron:backup", "ok"
    )
    assert_one_line_naming(done, str(missing), "COOP_SERVICE_KEY_FILE")
    assert door.terminate() == 0


def test_nothing_listening_at_the_socket_is_named_with_its_setting(harness: Harness) -> None:
    door = spawn_door(harness.env())  # on <folder>/door.sock
    elsewhere = harness.folder / "elsewhere.sock"
    done = chief_report(
        harness.env(COOP_DOOR_SOCKET=str(elsewhere)), "--source", "cron:backup", "ok"
    )
    line = assert_one_line_naming(done, f"nothing listens at {elsewhere}", "COOP_DOOR_SOCKET")
    assert "chief serve" in line  # who holds the Chief meanwhile
    assert door.terminate() == 0
