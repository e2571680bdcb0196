"""The squat: the door is down and another local user listens where its clients used to look
(127.0.0.1:8765, the old default) and tries to create the door's socket. Every client of the
door runs as an install would run it (no door setting, the defaults): `coop notify` then the
notifier as a drainer, `coop status`, and `chief report` while the Chief's lock is held (a door
that is starting), and `chief ack` (an urgent report acknowledged on the machine). The squatter
receives no byte, no row is marked delivered, and each client says in one line that the door is
not running. Real processes, a real second account."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from chief.serve_lock import ServeLock
from tests.support.door import OWNER, write_key
from tests.support.procs import clean_env
from tests.support.squatter import Squatter, root_reason, throwaway_user

pytestmark = pytest.mark.skipif(root_reason() is not None, reason=str(root_reason()))

COMMAND_TIMEOUT_S = 60.0
# Where every client of the door looked before the door moved to its socket (CHIEF_PORT's
# default), and where `/metrics` is served now.
OLD_DOOR_PORT = 8765


def run(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "h"
    folder.mkdir(mode=0o700)
    write_key(folder)
    return folder


def outbox_states(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "coop.db") as conn:
        return [state for (state,) in conn.execute("SELECT state FROM coop_outbox ORDER BY id")]


def test_a_squatter_on_the_old_port_receives_no_byte_and_no_row_is_delivered(home: Path) -> None:
    env = clean_env(home, CHIEF_OWNER=OWNER, COOP_ACTOR="builder", COOP_KICK="off")
    with throwaway_user() as user:
        with Squatter(user, ports=[OLD_DOOR_PORT], socket_path=home / "door.sock") as squatter:
            notified = run("engine", "notify", "squat probe: the key must not leave", env=env)
            assert notified.returncode == 0, notified.stderr
            drained = run("notifier", "drain", "--no-wait", env=env)
            status = run("engine", "status", env=env)
            lock = ServeLock(home / "chief.db")
            assert lock.try_acquire()  # a door that is starting: chief report asks it
            try:
                reported = run(
                    "chief", "report", "--source", "cron:squat", "--wait", "1", "probe", env=env
                )
            finally:
                lock.release()
            acked = run("chief", "ack", "1", env=env)
        received = squatter.received()
    assert squatter.socket_attempt.startswith("refused"), squatter.socket_attempt
    assert not (home / "door.sock").exists()
    assert received == {}, f"the squatter received {received!r}"
    assert outbox_states(home) == ["pending"]
    # Each client says so in one line.
    assert drained.returncode == 0, drained.stderr
    assert _lines_saying(drained.stderr, "the door is not running") == 1, drained.stderr
    door_lines = [line for line in status.stdout.splitlines() if line.startswith("door:")]
    assert len(door_lines) == 1, status.stdout
    assert "the door is not running" in door_lines[0], status.stdout
    assert "Traceback" not in status.stderr
    # The line is kept, and the cause named (nothing listens where the door should be) in one
    # line, exit 1: it cannot land by itself while the Chief's holder cannot be reached.
    assert reported.returncode == 1, reported.stderr
    assert "queued as" in reported.stderr, reported.stderr
    assert _lines_saying(reported.stdout + reported.stderr, "nothing listens at") == 1, (
        reported.stdout + reported.stderr
    )
    assert acked.returncode == 1, acked.stderr
    assert _lines_saying(acked.stderr, "is not running") == 1, acked.stderr
    assert "Traceback" not in acked.stderr


def _lines_saying(text: str, words: str) -> int:
    return sum(1 for line in text.splitlines() if words in line)
