"""The one reader of the engine's private files: the owner credential and the door's service key.

Every secret the engine reads comes through `read_private`, which refuses before reading a
byte anything but a regular file of this user's with no group or world bit (0600 or 0400; the
rule is `engine.private.trust_problem`), and a file that is empty or too large to be a key (a
wrong path). The notify door and the
notifier keep their own readers with the same rule (the packages share no code); the contract
test `tests/contract/test_shared_facts.py` holds the three to it.

It raises `engine.errors.KeyFileError` (missing, unreadable, not a regular file, empty or too
large) and its `KeyFileNotPrivate` (another user's, or a group or world bit is set: the message
says the `chown`/`chmod` to run).

Standard library only: the `coop` CLI reads the owner credential on every routed call.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine import private
from engine.errors import KeyFileError, KeyFileNotPrivate

#: A key is one short line; a bigger file is a wrong path. The door and the notifier use 4096 too.
MAX_KEY_FILE_BYTES = 4096


def read_private(path: Path, what: str) -> str:
    """The stripped text of the private file `path`; `what` names it in errors ("the service
    key"). Refuses a file others could read before reading it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise KeyFileError(f"{what} {path} cannot be read ({exc.strerror})") from exc
    try:
        # Checked on the open file itself, so the file read is the file checked.
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyFileError(f"{what} {path} is not a regular file")
        problem = private.trust_problem(info, path, what)
        if problem is not None:
            raise KeyFileNotPrivate(problem)
        raw = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise KeyFileError(f"{what} {path} cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"{what} {path} is larger than a key ({MAX_KEY_FILE_BYTES} bytes)")
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise KeyFileError(f"{what} {path} is not text") from exc
    if not key:
        raise KeyFileError(f"{what} {path} is empty")
    return key
