"""The single-instance lock of a chief.db's Chief: `ServeLock`, an exclusive `flock` on
`<chief.db>.serve.lock` holding its holder's pid.

It sits below the door (`chief serve`, a host application) and cron (`chief report`), which both
take it. The lock itself is `plumbing.pidlock`'s; what is the Chief's own is the holder each
writes, the wait for a `chief report` landing, and the refusals' words (`DoorError`).
"""

from __future__ import annotations

import time
from pathlib import Path

from chief.errors import DoorError
from plumbing import holders
from plumbing.pidlock import PidLock

# What a holder of the serve lock writes after its pid.
SERVE_HOLDER = "chief serve"
REPORT_HOLDER = "chief report"
# `chief report` holds the lock only to land its line (one SQLite transaction); a door that
# starts meanwhile waits this long for it instead of refusing to start.
REPORT_HOLD_WAIT_S = 10.0
REPORT_HOLD_POLL_S = 0.02


class ServeLock:
    """The single-instance lock of `chief serve`: an exclusive `flock` on `<chief.db>.serve.lock`.

    The door's per-row locks (`chief.phone.locks`) live in one process, so two doors on one
    chief.db could both ring for the same row; the second one refuses to start instead. The
    kernel drops the lock when the holder dies, however it dies, so a crash never leaves a stale
    lock behind.

    Whoever opens the Chief holds it: `chief serve`, a host application embedding the Chief, and
    `chief report` for the few milliseconds it lands a cron line itself when nobody else holds
    the Chief, and `chief telegram pair` while it waits for the owner's code (it reads the bot's
    updates, as the door does, and Telegram allows one reader). The holder writes `<pid> <what>`
    into the file; a door refused names it. A `chief report` holder is
    waited for (at most REPORT_HOLD_WAIT_S), so a door starting during such a landing still
    starts; any other holder is refused at once.
    """

    def __init__(self, db_path: Path, holder: str = SERVE_HOLDER) -> None:
        # Its folders 0700 whatever the umask; 0600, never through a link planted there.
        self._lock = PidLock(
            db_path.with_name(db_path.name + ".serve.lock"),
            "the serve lock",
            note=holder,
            make_folders=True,
            error=DoorError,
        )
        self.path = self._lock.path
        self.holder = holder

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; False (and nothing held) when someone does;
        DoorError in one line when the lock file cannot be opened (a link planted there)."""
        return self._lock.try_acquire()

    def current_holder(self) -> str:
        """What the file says of its holder (`<pid> <what>`), or `unknown`."""
        return self._lock.holder()

    def acquire(self) -> None:
        deadline = time.monotonic() + REPORT_HOLD_WAIT_S
        while not self.try_acquire():
            holder = self.current_holder()
            if holder.endswith(" " + REPORT_HOLDER) and time.monotonic() < deadline:
                time.sleep(REPORT_HOLD_POLL_S)  # a cron line landing: milliseconds
                continue
            pid, _, what = holder.partition(" ")
            if what and what != SERVE_HOLDER:  # `chief telegram pair` waiting for its code
                raise DoorError(
                    f"`{what}` (pid {pid}) holds {self.path}; let it finish or stop it, then "
                    "start the door"
                )
            raise DoorError(
                f"another `chief serve` (pid {pid}) already runs on {self.path.parent} "
                f"(it holds {self.path}); the door runs as one process: {holders.advice(pid)}"
            )

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> ServeLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
