"""What `coop restore` checks in a backup before it touches a live file: each database is the
one its owner's migrations make, whole, at a version this build knows (`plumbing.dbcheck` says
how). Anything else is one line naming the first thing wrong, and nothing is restored.

    check_ledger(path)   coop.db against the ledger's migrations (`engine.store.reference`)
    check_chief(path)    chief.db against the Chief's, by `chief check-backup PATH` in a child
                         process: the engine never imports the Chief (docs/architecture.md), and
                         the Chief's migrations are the Chief's to run

A ledger at an older version this build knows is restored as it is; the first command that
opens it migrates it, as it migrates any older ledger.
"""

from __future__ import annotations

import os
import subprocess
import sys

from engine.errors import BackupError

__all__ = ["check_chief", "check_ledger"]

#: `chief check-backup` reads and checks every page of chief.db: bounded, but generous.
CHIEF_CHECK_TIMEOUT_S = 600.0
#: `chief check-backup`'s exit status for a refused file (one line on stderr).
CHIEF_REFUSED = 1


def _refused(path: str, reason: str) -> BackupError:
    return BackupError(f"backup {path}: {reason}; nothing was restored")


def check_ledger(path: str) -> int:
    """The schema version of the ledger backup at `path`, once checked; else BackupError."""
    from engine.store import reference
    from plumbing import dbcheck

    try:
        return dbcheck.check(
            path,
            newest=reference.NEWEST,
            references=reference.schemas,
            maker="the ledger",
            kind="a Coop ledger",
        )
    except ValueError as exc:
        raise _refused(path, str(exc)) from None


def check_chief(path: str) -> None:
    """Check the chief.db backup at `path` with the Chief's own command; BackupError unless it
    passes."""
    # -P: the working folder is not put first on the import path, so no `chief/` found there
    # (a backup folder, another user's folder) runs in place of the Chief, as root maybe.
    argv = [sys.executable, "-P", "-m", "chief", "check-backup", os.path.abspath(path)]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CHIEF_CHECK_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _refused(path, f"the Chief's check did not run to its end ({exc})") from None
    if done.returncode == 0:
        return
    lines = done.stderr.strip().splitlines()
    if done.returncode == CHIEF_REFUSED and len(lines) == 1:
        said = lines[0].removeprefix("chief: ")
        raise _refused(path, said.removeprefix(f"{os.path.abspath(path)}: "))
    last = lines[-1] if lines else f"exit status {done.returncode}"
    raise _refused(path, f"the Chief's check failed ({last})")
