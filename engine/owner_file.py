"""The owner file: whether the ledger has one writer (the owner service), and where it listens.

After `coop cutover`, `<store>.owner.json` (or the file `COOP_OWNER_FILE` names) says the
ledger has one writer, the owner service, and the Unix socket it listens on:

    {"mode": "service", "database": "/abs/coop.db", "socket": "/abs/service.sock",
     "credential_file": "/abs/coop.db.owner.key", "transferred_at": "...", "backup": "..."}

An owner file of an older build names a TCP address (`url`) instead of a socket: every caller
refuses it in one line (`OwnerFileOutdated`) saying to run `coop cutover` again, which rewrites
that one field and nothing else.

The file is read once on **every** call (by `engine.api`, the edge that decides local or owner),
so running processes follow a cutover or its undo at their next call. A bad file fails closed
before anything is routed or opened: a wrong mode, another database, invalid JSON (nested past
the parser's depth too), a missing `database`, a `database`, `socket` or `credential_file` that is
not UTF-8 text without a NUL, a file over 64 KiB, one that is not a regular file (a FIFO would
block), one another user owns or a group or other bit opens (it says where the owner listens
and which credential to send there: another local user could have written it), or an
unreadable one all raise exactly
`Invalid Coop owner configuration` (`OwnerUnavailable`), with what was wrong in its `detail`,
which the CLI prints on a line of its own.

`engine.direct.connection()`, the direct door for scripts, consults this module too: it refuses
with `Direct SQL is disabled; use the Coop service API` when an owner file exists. No store
reads it: the fence the store installs (`engine.store.schema`) needs no owner file.

Standard library only: the `coop` CLI reads the owner file on every call.
"""

from __future__ import annotations

import os
import stat  # loaded by `os` already: free on the CLI's path

from engine.config import db_file, pure_path
from engine.errors import OwnerFileOutdated, OwnerUnavailable
from plumbing import files

# Off the CLI's cold path (`typing`, `pathlib`): annotations only; mypy reads them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

OWNER_FILE_ENV = "COOP_OWNER_FILE"
OWNER_FILE_SUFFIX = ".owner.json"
SERVICE_MODE = "service"

INVALID_OWNER = "Invalid Coop owner configuration"
#: An owner file is a few hundred bytes; a larger one is not an owner file, and is not read whole.
MAX_OWNER_FILE_BYTES = 64 * 1024
#: The fields the callers open or connect to: when present, text a path can be.
PATH_FIELDS = ("database", "socket", "credential_file")
#: The field an older build wrote where `socket` is now: the owner service's TCP URL.
TCP_FIELD = "url"
OUTDATED_OWNER = (
    "the owner file {path} names the owner service's TCP address {url!r} (written by an older"
    " build; coop serve now listens on a Unix socket): run `coop cutover` again to name its"
    " socket"
)


def owner_file(db: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> str:
    """`owner_file_path()` as text, for the CLI's path (no pathlib)."""
    env = os.environ if environ is None else environ
    if env.get(OWNER_FILE_ENV):
        return pure_path(os.path.expanduser(env[OWNER_FILE_ENV]))
    return pure_path(os.fspath(db)) + OWNER_FILE_SUFFIX


def owner_file_path(db: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> Path:
    """`COOP_OWNER_FILE`, else `<store>.owner.json` beside the database."""
    from pathlib import Path

    return Path(owner_file(db, environ))


def owner_config(db: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The owner file governing `db`, validated; None in local mode (no file).

    Raises before anything is routed or opened: `OwnerUnavailable(INVALID_OWNER)`, exactly
    those words, for any broken file; `.detail` says what was wrong.
    """
    db = pure_path(os.fspath(db)) if db is not None else db_file()
    path = owner_file(db)
    text = _owner_text(path)
    if text is None:
        return None  # no owner file can be there: local mode
    import json  # only when an owner file exists: local mode reads none

    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
        raise _invalid(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise _invalid(f"{path} is not a JSON object")
    if config.get("mode") != SERVICE_MODE:
        raise _invalid(f"mode must be 'service' in {path}")
    governed = config.get("database")
    if not isinstance(governed, str) or not governed:
        raise _invalid(f"{path} names no database")
    for name in PATH_FIELDS:
        value = config.get(name)
        if (value is not None or name == "database") and not _usable_text(value):
            raise _invalid(f"{name} in {path} must be UTF-8 text without a NUL, not {value!r}")
    if os.path.realpath(governed) != os.path.realpath(db):
        raise _invalid(f"{path} governs another database")
    if config.get("socket") is None and config.get(TCP_FIELD) is not None:
        raise OwnerFileOutdated(OUTDATED_OWNER.format(path=path, url=config[TCP_FIELD]))
    return config


def _owner_text(path: str) -> str | None:
    """The owner file's text; None when there is none. Only a regular file is read (a FIFO there
    would block every caller for good), and no further than an owner file can reach."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise _invalid(f"{path} cannot be read: {exc}") from exc
    chunks: list[bytes] = []
    size = 0
    try:
        info = os.fstat(fd)  # the open file's: the file read is the file checked
        if not stat.S_ISREG(info.st_mode):
            raise _invalid(f"{path} is not a regular file")
        problem = files.trust_problem(info, path, "the owner file")
        if problem is not None:
            raise _invalid(problem)
        while size <= MAX_OWNER_FILE_BYTES and (chunk := os.read(fd, MAX_OWNER_FILE_BYTES + 1)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _invalid(f"{path} cannot be read: {exc}") from exc
    finally:
        os.close(fd)
    if size > MAX_OWNER_FILE_BYTES:
        raise _invalid(f"{path} is larger than an owner file ({MAX_OWNER_FILE_BYTES} bytes)")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"{path} is not UTF-8 text: {exc}") from exc


def _usable_text(value: object) -> bool:
    """Text a path or a URL can be made of: no NUL, and UTF-8 (JSON can spell a lone
    surrogate, `"\\ud800"`, which no file name or request line can carry)."""
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _invalid(detail: str) -> OwnerUnavailable:
    """The design's exact words, and what exactly was wrong as the detail (its own line)."""
    return OwnerUnavailable(INVALID_OWNER, detail=detail)
