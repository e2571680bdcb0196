"""One process per file: an exclusive, non-blocking `flock` on a file holding its holder's pid.
The notifier's daemon and drainer's waiter (one per store), `coop serve` (one per ledger) and the
Chief (`chief serve`, `chief report`, `chief telegram pair`: one per chief.db) each take one. The
kernel drops it however the holder dies, so no stale claim outlives a crash.

    try_acquire()   claim it, or answer False at once and hold nothing
    holder()        what the holder wrote: its pid, then its `note` if it has one
    release()       drop it (closing the descriptor drops the flock)

The file is opened by `plumbing.files.lock_file`: 0600, never through a link planted at the
name, its folders made 0700 with `make_folders`. One that cannot be opened is raised as the
caller's `error` (OSError unless a package passes its own), in one line naming the lock.
"""

from __future__ import annotations

import os

from plumbing import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

#: The bytes of the file a `holder()` reads: a pid and a short note.
HOLDER_MAX_BYTES = 64


class PidLock:
    """The claim on `path`, named `what` in a refusal ("the daemon's lock file")."""

    def __init__(
        self,
        path: Path,
        what: str,
        *,
        note: str = "",
        make_folders: bool = False,
        error: Callable[[str], Exception] = OSError,
    ) -> None:
        self.path = path
        self.what = what
        self._note = note
        self._make_folders = make_folders
        self._error = error
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it, writing the pid (and the note); False, holding
        nothing, when someone does."""
        import fcntl

        try:
            fd = files.lock_file(self.path, make_folders=self._make_folders)
        except OSError as exc:
            raise self._error(f"cannot open {self.what} {self.path}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        written = f"{os.getpid()} {self._note}" if self._note else str(os.getpid())
        os.pwrite(fd, f"{written}\n".encode("ascii"), 0)
        self._fd = fd
        return True

    def holder(self) -> str:
        """What the holder wrote (`<pid>`, or `<pid> <note>`); "unknown" when it cannot be read."""
        try:
            raw = files.read_head(self.path, HOLDER_MAX_BYTES)
        except OSError:
            return "unknown"
        return raw.decode("ascii", "replace").strip() or "unknown"

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock
