"""Every expected error of `chief serve` and `chief telegram-emulator`, run as real processes:
one line on stderr naming what is wrong, a non-zero exit, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.door.conftest import Harness, clean_env, spawn_door
from tests.support.door import write_key

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chief", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _said(result: subprocess.CompletedProcess[str], prog: str) -> list[str]:
    """The lines the entry point itself printed (its log events are JSON lines)."""
    assert "Traceback" not in result.stderr, result.stderr
    assert "ExceptionGroup" not in result.stderr, result.stderr
    return [line for line in result.stderr.splitlines() if line.startswith(prog + ":")]


def test_chief_serve_with_an_unusable_chief_db_says_one_line(tmp_path: Path) -> None:
    write_key(tmp_path)
    (tmp_path / "chief.db").write_bytes(b"this is not a database file " * 10)
    result = _run(["serve"], clean_env(tmp_path))
    assert result.returncode == 1
    assert len(_said(result, "chief serve")) == 1


def test_chief_serve_on_a_taken_socket_says_one_line(harness: Harness, tmp_path: Path) -> None:
    # A second door, on a chief.db of its own (so its serve lock is free), told the socket a
    # live door holds: it refuses in one line and leaves the live door's socket alone.
    door = spawn_door(harness.env())
    second = tmp_path / "second"
    second.mkdir(mode=0o700)
    write_key(second)
    result = _run(["serve"], clean_env(second, COOP_DOOR_SOCKET=door.socket_path))
    assert result.returncode == 1
    [said] = _said(result, "chief serve")
    assert f"cannot listen on {door.socket_path} (COOP_DOOR_SOCKET)" in said, said
    assert "another process already answers" in said, said
    harness.status(door)  # the live door still answers there (200)
    assert door.terminate() == 0


def test_chief_emulator_on_a_taken_port_says_one_line(tmp_path: Path, taken_port: int) -> None:
    result = _run(["telegram-emulator", "--port", str(taken_port)], clean_env(tmp_path))
    assert result.returncode == 1
    assert len(_said(result, "chief telegram-emulator")) == 1


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (["serve", "--port", "eighty"], "chief serve"),
        (["serve", "--no-such-option"], "chief serve"),
        (["telegram-emulator", "--port", "eighty"], "chief telegram-emulator"),
        (["telegram-emulator", "--host", "192.0.2.1"], "chief telegram-emulator"),
    ],
)
def test_chief_usage_errors_are_one_line(tmp_path: Path, args: list[str], prog: str) -> None:
    write_key(tmp_path)
    result = _run(args, clean_env(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert len(_said(result, prog)) == 1
