"""Receipts: the client's own record of every call it sent to the owner, written before the call.

One file per request key in `<data home>/receipts` (directory 0700, files 0600):

    {"key": "...", "method": "done_todo", "input_sha256": "...", "database": "/abs/coop.db",
     "state": "uncertain", "created_at": "...", "settled_at": null, "outcome": null}

Never bodies, never credentials: only what `coop reconcile KEY` needs to ask the owner.

- `create` runs before a byte is sent: written and fsync'd under a temporary name, moved into
  place, directory fsync'd (and, when it made the folder, the folder's parent), state
  `uncertain`; a key that has a receipt already is refused. A receipt written afterwards would
  be lost exactly when it is needed.
- `settle` moves it to `committed` or `rejected` (atomic replace, fsync'd).
- `prune` deletes settled receipts older than a day, at most once an hour (the mtime of a stamp
  file says when it last ran); uncertain receipts stay until reconciled.

Standard library only: this is on the CLI's path.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.config import data_home
from plumbing import files

RECEIPTS_DIR_NAME = "receipts"
PRUNE_STAMP_NAME = ".pruned"
DIR_MODE = files.FOLDER_MODE
FILE_MODE = files.FILE_MODE
UNCERTAIN, COMMITTED, REJECTED = "uncertain", "committed", "rejected"
STATES = (UNCERTAIN, COMMITTED, REJECTED)
SETTLED_KEEP_S = 24 * 3600.0
PRUNE_EVERY_S = 3600.0


def receipts_dir(environ: Mapping[str, str] | None = None) -> Path:
    return data_home(environ) / RECEIPTS_DIR_NAME


def _ensure_dir(directory: Path) -> Path:
    if not directory.is_dir():
        missing = [folder for folder in (directory, *directory.parents) if not folder.exists()]
        files.make_folders(directory)  # each one it makes 0700, whatever the umask
        # A new folder's name is durable only once its parent is fsynced: without it a power
        # cut can take the folder, and the uncertain receipt in it, however well that one was
        # synced (tests/powercut/test_holes.py).
        for folder in missing:
            files.fsync_folder(folder.parent)
    # An older or hand-made folder may be looser: receipts name what callers did. Changed on its
    # descriptor, never through a link at the name.
    fd = files.open_folder(directory)
    try:
        if os.fstat(fd).st_mode & 0o777 != DIR_MODE:
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    return directory


def _path(directory: Path, key: str) -> Path:
    if not key or not all(ch.isalnum() or ch in "-_" for ch in key):
        raise ValueError(f"{key!r} is not a request key")
    return directory / f"{key}.json"


def create(
    key: str,
    method: str,
    input_sha256: str,
    database: str,
    *,
    directory: Path | None = None,
) -> Path:
    """Write the `uncertain` receipt for `key`; fails if one already exists (keys are fresh)."""
    directory = _ensure_dir(directory or receipts_dir())
    path = _path(directory, key)
    body = {
        "key": key,
        "method": method,
        "input_sha256": input_sha256,
        "database": database,
        "state": UNCERTAIN,
        "created_at": time.time(),
        "settled_at": None,
        "outcome": None,
    }
    if path.exists():
        raise FileExistsError(errno.EEXIST, "a receipt for this key exists already", str(path))
    # Written whole and synced under a temporary name, then moved into place: after a power cut
    # the receipt is whole or absent. Created in place, its name could be made durable by
    # another caller's directory fsync before its own bytes were, leaving an empty receipt no
    # reader can parse and prune never removes (tests/powercut/test_holes.py).
    temp = path.with_name(f".{path.name}.new")
    _write_synced(temp, body, os.O_EXCL)
    os.replace(temp, path)
    files.fsync_folder(directory)
    return path


def _write_synced(path: Path, body: dict[str, Any], flag: int) -> None:
    """Write `body` as JSON to `path` (created with `flag`: O_EXCL or O_TRUNC) and fsync it."""
    fd = files.open_file(path, os.O_WRONLY | os.O_CREAT | flag, FILE_MODE)
    try:
        os.write(fd, json.dumps(body, sort_keys=True).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read(key: str, *, directory: Path | None = None) -> dict[str, Any] | None:
    path = _path(directory or receipts_dir(), key)
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def settle(
    key: str, state: str, outcome: str | None = None, *, directory: Path | None = None
) -> dict[str, Any] | None:
    """Record how the call ended; `outcome` is a short word (never a body). None if no receipt."""
    if state not in (COMMITTED, REJECTED):
        raise ValueError(f"a receipt settles as committed or rejected, not {state!r}")
    directory = directory or receipts_dir()
    body = read(key, directory=directory)
    if body is None:
        return None
    body.update(state=state, settled_at=time.time(), outcome=outcome or state)
    path = _path(directory, key)
    temp = path.with_name(f".{path.name}.tmp")
    _write_synced(temp, body, os.O_TRUNC)
    os.replace(temp, path)
    files.fsync_folder(directory)
    return body


def all_receipts(*, directory: Path | None = None) -> list[dict[str, Any]]:
    directory = directory or receipts_dir()
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        # A receipt being replaced or pruned under us is simply skipped.
        with contextlib.suppress(FileNotFoundError, ValueError):
            found.append(dict(json.loads(path.read_text(encoding="utf-8"))))
    return sorted(found, key=lambda r: r.get("created_at") or 0)


def uncertain(*, directory: Path | None = None) -> list[dict[str, Any]]:
    """Receipts nobody has settled yet, oldest first: what `coop reconcile` is for."""
    return [r for r in all_receipts(directory=directory) if r.get("state") == UNCERTAIN]


def prune(*, directory: Path | None = None, now: float | None = None) -> int:
    """Delete settled receipts settled more than a day ago, at most once an hour; return how many.

    Why the hour: the folder grew to hundreds of files in days; listing it on every call would
    cost more than the call.
    """
    directory = directory or receipts_dir()
    if not directory.is_dir():
        return 0
    now = time.time() if now is None else now
    stamp = directory / PRUNE_STAMP_NAME
    try:
        if now - stamp.stat().st_mtime < PRUNE_EVERY_S:
            return 0
    except FileNotFoundError:
        pass
    fd = files.open_file(stamp, os.O_WRONLY | os.O_CREAT, FILE_MODE)  # never through a link
    try:
        os.utime(fd, (now, now))
    finally:
        os.close(fd)
    removed = 0
    for receipt in all_receipts(directory=directory):
        settled_at = receipt.get("settled_at")
        if receipt.get("state") == UNCERTAIN or settled_at is None:
            continue
        if now - float(settled_at) > SETTLED_KEEP_S:
            with contextlib.suppress(FileNotFoundError):
                _path(directory, receipt["key"]).unlink()
                removed += 1
    return removed
