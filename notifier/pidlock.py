"""The notifier's claims (the daemon and the drainer's waiter, one per store; `coop serve`, one
per ledger: `<coop.db>.serve.lock`): `plumbing.pidlock`'s lock, a file that cannot be opened
worded as the notifier's `StoreError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from notifier.errors import StoreError
from plumbing import pidlock

if TYPE_CHECKING:
    from pathlib import Path


class PidLock(pidlock.PidLock):
    """`try_acquire()` claims the lock or answers False at once; `holder()` names the pid that
    holds it; `release()` drops it."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(path, what, error=StoreError)
