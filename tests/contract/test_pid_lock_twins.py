"""The pid-lock twins: `chief.serve_lock.ServeLock` and `notifier.pidlock.PidLock`.

The packages share no code, so each keeps its own copy of one idiom: an exclusive,
non-blocking `flock` on a file that holds its holder's pid. The same checks run on both copies,
on real files and real processes:

- a claim writes the holder's pid first in the file, in a file only its owner may read;
- while one holds it, a second claim (another open of the file, in this process or another)
  answers False at once and holds nothing; a release lets the next claim in;
- it is a whole-file `flock`, so any other `flock` of the file (an operator's `flock(1)`) sees it;
- the kernel drops it when the holder dies by SIGKILL: no stale claim outlives a crash;
- a child process the holder starts does not inherit it, so the claim ends with its holder.

What differs, on purpose: ServeLock writes `<pid> <what>` (a `chief report` holder is waited for)
and makes the file's folder; PidLock writes the pid alone into a folder the store already has.
A file that cannot be opened is OSError from ServeLock (its callers word it: `chief serve`,
`chief report`) and the notifier's StoreError from PidLock.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from chief.serve_lock import ServeLock
from notifier.pidlock import PidLock
from tests.support.procs import PROCESS_TIMEOUT_S, child_env
from tests.support.waiting import wait_until_sync


class Claim(Protocol):
    path: Path

    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...


def serve_lock(db_path: Path) -> Claim:
    return ServeLock(db_path, holder="chief serve")


def pid_lock(db_path: Path) -> Claim:
    return PidLock(db_path.with_name(db_path.name + ".daemon.lock"), "daemon lock")


TWINS: dict[str, Callable[[Path], Claim]] = {"chief": serve_lock, "notifier": pid_lock}

# The child takes the same twin on the same file and holds it until it is killed.
CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.contract.test_pid_lock_twins import TWINS
lock = TWINS[{twin!r}](Path({db!r}))
assert lock.try_acquire()
time.sleep({hold_s!r})
"""


def _pid_in(path: Path) -> int | None:
    words = path.read_text(encoding="ascii", errors="replace").split()
    return int(words[0]) if words and words[0].isdigit() else None


@pytest.mark.parametrize("twin", TWINS)
def test_a_claim_writes_the_holders_pid_in_a_private_file(twin: str, tmp_path: Path) -> None:
    lock = TWINS[twin](tmp_path / "x.db")
    assert lock.try_acquire()
    try:
        assert _pid_in(lock.path) == os.getpid()
        assert lock.path.stat().st_mode & 0o777 == 0o600
    finally:
        lock.release()


@pytest.mark.parametrize("twin", TWINS)
def test_a_held_lock_refuses_a_second_claim_until_released(twin: str, tmp_path: Path) -> None:
    first, second = TWINS[twin](tmp_path / "x.db"), TWINS[twin](tmp_path / "x.db")
    assert first.try_acquire()
    try:
        assert not second.try_acquire()
        assert _pid_in(first.path) == os.getpid()  # the refused claim wrote nothing
    finally:
        first.release()
    assert second.try_acquire()
    second.release()


@pytest.mark.parametrize("twin", TWINS)
def test_it_is_a_whole_file_flock(twin: str, tmp_path: Path) -> None:
    lock = TWINS[twin](tmp_path / "x.db")
    assert lock.try_acquire()
    fd = os.open(lock.path, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.release()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once released
    finally:
        os.close(fd)


@pytest.mark.parametrize("twin", TWINS)
def test_the_kernel_drops_the_claim_of_a_killed_holder(twin: str, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    lock = TWINS[twin](db)
    script = CHILD.format(
        repo=str(Path(__file__).resolve().parents[2]), twin=twin, db=str(db), hold_s=60.0
    )
    child = subprocess.Popen([sys.executable, "-c", script], env=child_env())
    try:
        wait_until_sync(
            lambda: lock.path.exists() and _pid_in(lock.path) == child.pid,
            what=f"the child {child.pid} holding {lock.path}",
        )
        assert not lock.try_acquire()
        child.send_signal(signal.SIGKILL)
        child.wait(PROCESS_TIMEOUT_S)
        assert lock.try_acquire()
        assert _pid_in(lock.path) == os.getpid()
        lock.release()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(PROCESS_TIMEOUT_S)


@pytest.mark.parametrize("twin", TWINS)
def test_a_child_of_the_holder_does_not_keep_the_claim(twin: str, tmp_path: Path) -> None:
    lock = TWINS[twin](tmp_path / "x.db")
    assert lock.try_acquire()
    # close_fds=False: only a descriptor marked inheritable would reach the child. It answers
    # once it runs, past its exec (a descriptor closed on exec is gone by then).
    script = "import time; print('up', flush=True); time.sleep(60)"
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, close_fds=False
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "up\n"
            lock.release()
            again = TWINS[twin](tmp_path / "x.db")
            assert again.try_acquire()  # the child, still running, holds nothing
            again.release()
        finally:
            child.kill()
