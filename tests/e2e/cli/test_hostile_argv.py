"""Hostile input to the real console processes (issue 19): argv bytes that are not UTF-8 (Python
decodes them with `surrogateescape`, which only a real process does), a port past 65535 (the
socket layer took it modulo 65536 and the service started) and a stdin far larger than a report
(it was read whole before it was refused). Each is one line on stderr, exit status 2, nothing
written, never a traceback."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support.door import OWNER, write_key
from tests.support.procs import clean_env

pytestmark = pytest.mark.timeout(120)

#: Long enough for a refusal on a loaded machine; a service that started instead is killed then.
REFUSAL_TIMEOUT_S = 30.0
NOT_UTF8 = b"\xff"


def run(module: str, args: list[bytes], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable.encode(), b"-m", module.encode(), *args],
        env=env,
        capture_output=True,
        timeout=REFUSAL_TIMEOUT_S,
        check=False,
    )


def refused(result: subprocess.CompletedProcess[bytes], *words: bytes) -> None:
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    assert result.returncode == 2, result.stderr.decode(errors="replace")
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr.decode(errors="replace")
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, COOP_ACTOR="builder", COOP_KICK="off", CHIEF_OWNER=OWNER)


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([b"notify", NOT_UTF8], b"TEXT"),
        ([b"todo", b"add", b"caf\xe9"], b"TITLE"),
        ([b"todo", b"done", b"1", b"--summary", NOT_UTF8], b"--summary"),
    ],
)
def test_coop_refuses_argv_bytes_that_are_not_utf8(
    env: dict[str, str], tmp_path: Path, args: list[bytes], named: bytes
) -> None:
    assert run("engine", [b"todo", b"add", b"x"], env).returncode == 0
    before = counts(tmp_path / "coop.db")
    refused(run("engine", args, env), named, b"not valid UTF-8")
    assert counts(tmp_path / "coop.db") == before


def test_chief_log_refuses_an_owner_that_is_not_utf8(env: dict[str, str]) -> None:
    seeded = run("chief", [b"report", b"--source", b"cron:seed", b"--fire", b"1", b"x"], env)
    assert seeded.returncode == 0, seeded.stderr
    refused(run("chief", [b"log", b"--owner", NOT_UTF8], env), b"--owner", b"not valid UTF-8")


@pytest.mark.parametrize("port", [b"99999", b"65536", b"-1"])
def test_a_port_past_65535_is_refused_before_anything_starts(
    env: dict[str, str], tmp_path: Path, port: bytes
) -> None:
    # The emulator is the one `chief` command that takes a port (the door's app is on its socket;
    # its /metrics port is a setting, CHIEF_METRICS_PORT, held by the settings' own tests).
    write_key(tmp_path)
    refused(run("chief", [b"telegram-emulator", b"--port", port], env), b"--port", b"65535")


def test_chief_report_refuses_a_huge_stdin_without_reading_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    """64 MB offered on stdin: the command reads at most 16 kB of it (4,000 characters of 4
    bytes, and one more), refuses, and the writer meets a closed pipe long before the end."""
    offered = 64 * 1024 * 1024
    chunk = b"x" * 65536
    written = 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "chief", "report", "--source", "cron:big", "--fire", "1", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stdin, stdout, stderr_pipe = proc.stdin, proc.stdout, proc.stderr
    assert stdin is not None
    assert stdout is not None
    assert stderr_pipe is not None

    def feed() -> None:
        nonlocal written
        with contextlib.suppress(BrokenPipeError, ValueError):
            while written < offered:
                written += stdin.write(chunk)
        with contextlib.suppress(BrokenPipeError):
            stdin.close()

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    with stdout, stderr_pipe:
        stderr = stderr_pipe.read()
        stdout.read()
    proc.wait(REFUSAL_TIMEOUT_S)
    feeder.join(REFUSAL_TIMEOUT_S)
    refused(subprocess.CompletedProcess(proc.args, proc.returncode, b"", stderr), b"4000")
    assert written < offered, "the whole stdin was read before the refusal"
    # No figure for the peak memory: a child's ru_maxrss starts from the parent's at the fork.
    assert (
        not (tmp_path / "chief.db").exists()
        or counts(tmp_path / "chief.db").get("chief_report_outbox", 0) == 0
    )
