"""plumbing.pidlock, one process per file, on real files and real processes:

- a claim writes the holder's pid first in the file (then its note, if it has one), in a file
  only its owner may read;
- while one holds it, a second claim (another open of the file, in this process or another)
  answers False at once and holds nothing; a release lets the next claim in;
- it is a whole-file `flock`, so any other `flock` of the file (an operator's `flock(1)`) sees it;
- the kernel drops it when the holder dies by SIGKILL: no stale claim outlives a crash;
- a child process the holder starts does not inherit it, so the claim ends with its holder;
- a file that cannot be opened is one line naming the lock, as the caller's error type.

The packages' own words around it: the Chief's `ServeLock` (tests/unit/door/
test_serve_lock_holders.py), and the links each refuses (tests/integration/trust/).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from plumbing.pidlock import PidLock
from tests.support.procs import PROCESS_TIMEOUT_S, child_env
from tests.support.waiting import wait_until_sync

# The child takes the lock on the same file and holds it until it is killed.
CHILD = """
import time
from pathlib import Path
from plumbing.pidlock import PidLock
assert PidLock(Path({path!r}), "the lock").try_acquire()
time.sleep({hold_s!r})
"""


def _pid_in(path: Path) -> int | None:
    words = path.read_text(encoding="ascii", errors="replace").split()
    return int(words[0]) if words and words[0].isdigit() else None


def _lock(tmp_path: Path) -> PidLock:
    return PidLock(tmp_path / "x.lock", "the lock")


@pytest.mark.parametrize("note", ["", "chief serve"])
def test_a_claim_writes_the_holders_pid_in_a_private_file(tmp_path: Path, note: str) -> None:
    lock = PidLock(tmp_path / "x.lock", "the lock", note=note)
    assert lock.try_acquire()
    try:
        assert _pid_in(lock.path) == os.getpid()
        assert lock.path.stat().st_mode & 0o777 == 0o600
        assert lock.holder() == f"{os.getpid()} {note}".strip()
    finally:
        lock.release()


def test_a_held_lock_refuses_a_second_claim_until_released(tmp_path: Path) -> None:
    first, second = _lock(tmp_path), PidLock(tmp_path / "x.lock", "the lock", note="other")
    assert first.try_acquire()
    try:
        assert not second.try_acquire()
        assert first.holder() == str(os.getpid())  # the refused claim wrote nothing
    finally:
        first.release()
    assert second.try_acquire()
    second.release()


def test_it_is_a_whole_file_flock(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    assert lock.try_acquire()
    fd = os.open(lock.path, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.release()
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once released
    finally:
        os.close(fd)


def test_the_kernel_drops_the_claim_of_a_killed_holder(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    script = CHILD.format(path=str(lock.path), hold_s=60.0)
    child = subprocess.Popen([sys.executable, "-c", script], env=child_env())
    try:
        wait_until_sync(
            lambda: lock.path.exists() and _pid_in(lock.path) == child.pid,
            what=f"the child {child.pid} holding {lock.path}",
        )
        assert not lock.try_acquire()
        assert lock.holder() == str(child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait(PROCESS_TIMEOUT_S)
        assert lock.try_acquire()
        assert _pid_in(lock.path) == os.getpid()
        lock.release()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(PROCESS_TIMEOUT_S)


def test_a_child_of_the_holder_does_not_keep_the_claim(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
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
            again = _lock(tmp_path)
            assert again.try_acquire()  # the child, still running, holds nothing
            again.release()
        finally:
            child.kill()


def test_its_folders_are_made_private_only_when_asked(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "x.lock"
    with pytest.raises(OSError, match=r"^cannot open the lock .*x\.lock: "):
        PidLock(deep, "the lock").try_acquire()
    lock = PidLock(deep, "the lock", make_folders=True)
    assert lock.try_acquire()
    lock.release()
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700


class _PackageError(Exception):
    """A package's own error, which words the failure at its edge."""


def test_a_file_that_cannot_be_opened_is_one_line_of_the_callers_error(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("not the lock")
    (tmp_path / "x.lock").symlink_to(tmp_path / "elsewhere")  # a link planted at the name
    lock = PidLock(tmp_path / "x.lock", "the daemon's lock file", error=_PackageError)
    with pytest.raises(_PackageError) as caught:
        lock.try_acquire()
    line = str(caught.value)
    assert line.startswith(f"cannot open the daemon's lock file {tmp_path / 'x.lock'}: ")
    assert "\n" not in line
    assert lock.holder() == "unknown"  # never read through the link either
    assert (tmp_path / "elsewhere").read_text() == "not the lock"
