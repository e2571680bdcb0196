"""The engine's edge of the floor's key reader (`plumbing.keyfile.read_key`): the owner
credential and the door's service key, refused in the engine's error tree.

`read_private` raises `engine.errors.KeyFileError` (missing, unreadable, not a regular file,
empty or too large) and its `KeyFileNotPrivate` (another user's, or a group or world bit is set:
the message says the `chown`/`chmod` to run).

Standard library only: the `coop` CLI reads the owner credential on every routed call.
"""

from __future__ import annotations

import os

from engine.errors import KeyFileError, KeyFileNotPrivate
from plumbing import files
from plumbing.keyfile import read_key


def read_private(path: str | os.PathLike[str], what: str) -> str:
    """The stripped text of the private file `path`; `what` names it in errors ("the service
    key"). Refuses a file others could read before reading it."""
    try:
        return read_key(path, what)
    except files.NotPrivate as exc:
        raise KeyFileNotPrivate(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise KeyFileError(str(exc)) from exc
