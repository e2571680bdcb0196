"""Private by construction: the engine's one rule for the files it trusts, and the makers of its
folders and files, owner-only whatever the umask of the process that makes them.

    trust_problem(info, path, what)   why a file the engine trusts (the service key, the owner
                                      file, the owner credential) must be refused, or None
    make_folders(folder)              every missing folder of the path made 0700
    private_file(path)                a file made 0600 if missing; one of this user's tightened
    private_database(path)            the same for a SQLite file and its -wal and -shm
    write_atomic(path, data)          a new 0600 file put in place whole, never through a link

Trusted files are refused, never repaired: a key, an owner file or a credential that another
user owns, or that a group or other bit lets others read or write, may have been replaced, so
the refusal says what to check and the `chown`/`chmod` to run. Data files are tightened
instead: a database, its -wal/-shm, a log or a receipt of this user's that a loose umask left
0644 (before this rule) only loses the group and other bits, which takes access away and grants
none; one of another user's is refused (unless root opens it: the operator acting for the
service's user, as `coop restore` does). A folder that exists already is left as it is (it may
be one the engine did not make, `/tmp` or a shared `/srv`); every folder the engine makes is
0700. SQLite gives a new -wal and -shm the database file's own mode, so a 0600 database makes
them 0600 whatever the umask.

Twin of `chief.private` (the packages share no code): the modes and the trust rule are pinned
equal by tests/contract/test_shared_facts.py. Standard library only, and no pathlib: the `coop`
CLI opens the ledger on every local call.
"""

from __future__ import annotations

import contextlib
import os
import stat

FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: The group and other bits: none may be set on a file the engine trusts or keeps.
OTHERS_BITS = 0o077
#: What SQLite keeps beside a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm")


def trust_problem(info: os.stat_result, path: str | os.PathLike[str], what: str) -> str | None:
    """Why the file `what` at `path`, as `info` (an `fstat` of the open file) shows it, must not
    be trusted, in one line with what to run; None when it is a regular file of this user's
    with no group or other bit."""
    if not stat.S_ISREG(info.st_mode):
        return f"{what} {os.fspath(path)} is not a regular file"
    me = os.geteuid()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != me:
        run = f"chown {me} {os.fspath(path)}" + (
            f" && chmod 600 {os.fspath(path)}" if mode & OTHERS_BITS else ""
        )
        return (
            f"{what} {os.fspath(path)} belongs to uid {info.st_uid}, not to uid {me} who runs "
            f"this; it must be private (0600) to this user: check what it holds, then run `{run}`"
        )
    if mode & OTHERS_BITS:
        return (
            f"{what} {os.fspath(path)} has mode {mode:04o}; it must be private (0600): run "
            f"`chmod 600 {os.fspath(path)}`"
        )
    return None


def make_folders(folder: str | os.PathLike[str]) -> None:
    """Make `folder` and each missing folder above it 0700 (`os.makedirs` would give the ones
    above the umask's mode). Folders that exist are left as they are."""
    missing = []
    path = os.path.abspath(os.fspath(folder))
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for path in reversed(missing):
        # FileExistsError: made meanwhile by another opener (or a file is in the way: the open
        # that follows says so).
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, FOLDER_MODE)


def private_file(path: str | os.PathLike[str]) -> None:
    """Make `path` an empty 0600 file unless it exists (never through a planted link); an
    existing one loses its group and other bits (`tighten`)."""
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        tighten(path)
    else:
        os.close(fd)


def tighten(path: str | os.PathLike[str]) -> None:
    """Take the group and other bits off the existing data file `path`; OSError in one line
    when it is another user's (root excepted); nothing when it is gone."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    # Root is the operator acting for the service's user (`coop restore`, `sudo coop status`):
    # it may open their files, as SQLite lets it. Anyone else is handed a file another user
    # could have planted in a loose folder.
    if info.st_uid != os.geteuid() and os.geteuid() != 0:
        raise OSError(
            f"{os.fspath(path)} belongs to uid {info.st_uid}, not to uid {os.geteuid()} who "
            f"runs this: check what it holds, then run `chown {os.geteuid()} {os.fspath(path)}`"
        )
    if info.st_mode & OTHERS_BITS:
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~OTHERS_BITS)


def private_database(path: str | os.PathLike[str]) -> None:
    """Ready `path` for `sqlite3.connect`: its folders made 0700, the file made 0600 (SQLite then
    makes -wal and -shm alike), and an older file's -wal and -shm tightened with it."""
    make_folders(os.path.dirname(os.path.abspath(os.fspath(path))))
    private_file(path)
    for suffix in SQLITE_SIDE_FILES:
        tighten(os.fspath(path) + suffix)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Put `data` at `path` as a 0600 file, whole or not at all: written to a fresh temporary
    name in the same folder (`mkstemp`: O_EXCL, so never through a link planted there), fsynced,
    renamed over `path`, and the folder fsynced so the rename survives a power cut."""
    import tempfile  # only where a file is written whole, off the cold path of every open

    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    make_folders(folder)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.")
    try:
        try:
            os.fchmod(fd, FILE_MODE)  # mkstemp's is 0600 already: said here, not assumed
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):  # renamed already, or never there
            os.unlink(temporary)
        raise
    fsync_folder(folder)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename or an unlink in `folder` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
