"""An exclusive, non-blocking `flock` on a file holding its holder's pid: the claim the
daemon (one per store), the drainer's waiter (one per store) and `coop serve` (one per ledger:
`<coop.db>.serve.lock`) each take. The kernel drops it however the holder dies, so no stale
claim outlives a crash.

Its twin in chief is `chief.serve_lock.ServeLock` (the packages share no code);
tests/contract/test_pid_lock_twins.py pins the two alike."""

from __future__ import annotations

import os
from pathlib import Path

from notifier.errors import StoreError
from plumbing import files


class PidLock:
    """`try_acquire()` claims the lock or answers False at once; `holder()` names the pid that
    holds it; `release()` (closing the descriptor) drops it."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        import fcntl

        try:
            fd = files.lock_file(self.path)  # 0600, never through a link planted at the name
        except OSError as exc:
            raise StoreError(f"cannot open {self.what} {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return True

    def holder(self) -> str:
        """The pid written by whoever holds the lock ("unknown" when it cannot be read)."""
        try:
            return files.read_head(self.path, 64).decode("ascii", "replace").strip() or "unknown"
        except OSError:
            return "unknown"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock
