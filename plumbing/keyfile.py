"""The one reader of the project's key files: the shared service key and the owner credential.

    SERVICE_KEY_FILE_NAME   `service.key`, in the data folder
    MAX_KEY_FILE_BYTES      a key is one short line; a larger file is a wrong path
    service_key_file(env)   `COOP_SERVICE_KEY_FILE`, else `<data folder>/service.key`
    read_key(path, what)    the stripped text of a key file that is this user's alone

`read_key` opens the file once (never blocking on a FIFO) and checks the open file before it
reads a byte, so the file read is the file checked: a regular file of this user's with no group
or other bit (`plumbing.files.trust_problem`). It refuses with a built-in error whose text is
one whole line naming `what` and the path; each package words it at its edge
(`engine.keyfile`, `notifier.config`, `chief.door.config`):

    OSError                 it cannot be opened or read, or is not a regular file
                            (FileNotFoundError when it does not exist)
    files.NotPrivate        another user's, or a group or other bit is set: the line says the
                            `chown`/`chmod` to run (a PermissionError: catch it first)
    ValueError              empty, larger than a key, or not UTF-8 text

Standard library only: the `coop` CLI reads the owner credential on every routed call.
"""

from __future__ import annotations

import os
import stat

from plumbing import files, home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SERVICE_KEY_FILE_NAME = "service.key"
MAX_KEY_FILE_BYTES = 4096


def service_key_file(environ: Mapping[str, str] | None = None) -> str:
    """Where the shared service key is: `COOP_SERVICE_KEY_FILE`, else in the data folder."""
    env = os.environ if environ is None else environ
    explicit = env.get("COOP_SERVICE_KEY_FILE")
    if explicit:
        return os.path.expanduser(explicit)
    return os.path.join(home.data_folder(env), SERVICE_KEY_FILE_NAME)


def read_key(path: str | os.PathLike[str], what: str) -> str:
    """The stripped text of the key file `path`; `what` names it in the refusal's line ("the
    service key", "COOP_SERVICE_KEY_FILE"). See the module docstring for the refusals."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise type(exc)(f"{what} {shown} cannot be read ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{what} {shown} is not a regular file")
        problem = files.trust_problem(info, shown, what)
        if problem is not None:
            raise files.NotPrivate(problem)
        raw = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        if exc.strerror is None:  # a one-line refusal above (NotPrivate included)
            raise
        raise type(exc)(f"{what} {shown} cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise ValueError(f"{what} {shown} is larger than a key ({MAX_KEY_FILE_BYTES} bytes)")
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{what} {shown} is not UTF-8 text") from None
    if not key:
        raise ValueError(f"{what} {shown} is empty")
    return key
