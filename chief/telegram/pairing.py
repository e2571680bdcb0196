"""The Telegram pairing file: which chat and which user the door obeys, as `chief telegram pair`
found them (`<COOP_HOME>/telegram-pairing.json`, mode 0600):

    {"chat_id": 4242, "user_id": 4242, "username": "owner" | null, "first_name": "Owner" | null,
     "bot": "@coop_bot", "paired_at": "2026-12-01T17:30:00+00:00"}

`write_pairing` replaces it atomically (`plumbing.files.write_atomic`: a fresh 0600 temporary
name in the same folder, never a link planted there, written and fsynced, renamed over the old
one, then the folder fsynced): a crash leaves the old pairing or the new one, never half of one.
`read_pairing` answers None when there is no file; a file that cannot be read or is not a
pairing raises `ChiefConfigError` in one line naming it and what to do. The pairing says which
chat the door obeys and rings, so a file another user owns, or one a group or other bit opens,
is refused the same way (never repaired: it may have been swapped for one naming their chat).
`remove_pairing` removes it and says whether there was one. The second person's pairing
(`telegram-pairing-second.json`, `chief telegram pair --second`) is the same kind of file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from chief.errors import ChiefConfigError
from plumbing import files

PAIRING_FILE_NAME = "telegram-pairing.json"
# The second person's (issue 35: `chief telegram pair --second`), the same format and rules.
SECOND_PAIRING_FILE_NAME = "telegram-pairing-second.json"
PAIRING_FILE_MODE = files.FILE_MODE
# A pairing is a few hundred bytes; anything much larger is not one.
MAX_PAIRING_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Pairing:
    """The owner's chat and user, as the `/start CODE` that paired them came."""

    chat_id: int
    user_id: int
    username: str | None
    first_name: str | None
    bot: str
    paired_at: str

    def who(self) -> str:
        """The paired user as a person reads it: `Owner (@owner, user 4242) in chat 4242`."""
        names = [self.first_name or ""]
        handle = f"@{self.username}, " if self.username else ""
        names.append(f"({handle}user {self.user_id})")
        return " ".join(name for name in names if name) + f" in chat {self.chat_id}"


def _broken(path: Path, why: str) -> ChiefConfigError:
    return ChiefConfigError(
        f"the Telegram pairing file {path} {why}; pair again with `chief telegram pair`, or "
        "remove it with `chief telegram unpair`"
    )


def read_pairing(path: Path) -> Pairing | None:
    """The pairing in `path`, or None when there is none; ChiefConfigError when it is broken."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _broken(path, f"cannot be read ({exc.strerror})") from exc
    try:
        # Checked on the open file itself, so the file read is the file checked.
        problem = files.trust_problem(os.fstat(fd), path, "the Telegram pairing file")
        if problem is not None:
            raise ChiefConfigError(problem)
        raw = os.read(fd, MAX_PAIRING_FILE_BYTES + 1)
    except OSError as exc:
        raise _broken(path, f"cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(raw) > MAX_PAIRING_FILE_BYTES:
        raise _broken(path, f"is over {MAX_PAIRING_FILE_BYTES} bytes")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _broken(path, "is not JSON") from exc
    try:
        return _pairing(document)
    except ValueError as exc:
        raise _broken(path, f"is not a pairing ({exc})") from exc


def _pairing(document: Any) -> Pairing:
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    for name in ("chat_id", "user_id"):
        value = document.get(name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
    if document["user_id"] <= 0:
        raise ValueError("user_id must be positive")
    for name in ("username", "first_name"):
        if document.get(name) is not None and not isinstance(document[name], str):
            raise ValueError(f"{name} must be text or null")
    for name in ("bot", "paired_at"):
        if not isinstance(document.get(name), str):
            raise ValueError(f"{name} must be text")
    return Pairing(
        chat_id=document["chat_id"],
        user_id=document["user_id"],
        username=document.get("username"),
        first_name=document.get("first_name"),
        bot=document["bot"],
        paired_at=document["paired_at"],
    )


def write_pairing(path: Path, pairing: Pairing) -> None:
    """Replace the pairing in `path` atomically, mode 0600 (see the module docstring)."""
    data = (json.dumps(asdict(pairing), ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    files.write_atomic(path, data)


def remove_pairing(path: Path) -> bool:
    """Remove the pairing file (a broken one too); False when there was none."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ChiefConfigError(
            f"the Telegram pairing file {path} cannot be removed ({exc.strerror})"
        ) from exc
    files.fsync_folder(path.parent)
    return True
