"""Every file the product creates, opens for writing, chmods or chowns in a data folder, a backup
folder or an install root, opened one way: never through a link, never into a folder another user
could redirect, its mode and owner set on the open descriptor.

    open_folder(path, make=)          the folder's descriptor, walked from / one name at a time
    open_file(path, flags, mode)      a file opened relative to its folder's descriptor, with
                                      O_NOFOLLOW; a new one made O_EXCL and given `mode` (fchmod)
    open_at(folder_fd, name, ...)     the same inside a folder already open
    path_in(folder_fd, name, ...)     a path through that descriptor, for SQLite
    lock_file(path)                   a lock file (0600, made when missing), ready for `flock`
    read_head(path, limit)            the first bytes of a small file, never through a link
    make_folders(folder)              every missing folder of the path made 0700
    private_file(path)                a file made 0600 if missing; an existing one tightened
    tighten(path)                     an existing data file's group and other bits taken off
    private_database(path)            the same for a SQLite file and its -wal and -shm
    write_atomic(path, data)          a new file put in place whole (fresh name, fsync, rename)
    fsync_folder(folder)              a rename or an unlink in `folder` made durable
    trust_problem(info, path, what)   why a file trusted for its secret must be refused, or None
    refuse_foreign_folder(path, cmd)  root refused on a data folder another user owns
    check_backup_target(path)         a folder a backup may be written under, or refused

Errors are built-in ones, each one line that names the path: `LinkRefused` (an OSError) for a
link where the product writes, `ForeignFolder` (a PermissionError) for root on another user's
folder, `NotPrivate` (a PermissionError) for a folder others could write or redirect. The
packages word them at their edge.

Why links are refused rather than resolved: `open`, `chmod` and `chown` follow a link, so root
acting in a folder its owner can write would create, change or hand over whatever that owner
pointed the name at (`/etc/ld.so.preload`, root's own files). A link met while walking the
folders above is followed only where it sits in a folder nobody but root and the caller can
write (OpenSSH's StrictModes rule: `/var/run -> /run` stays usable); the last name is never
followed.

Why root refuses another user's data folder instead of switching to that user: SQLite, run as
root, opens the -wal and -shm by path (through a link) and hands them to the database's owner,
and files root creates there (a -wal, a lock) would lock the service's user out; and switching
the uid of a process whose threads already run is fragile. `sudo -u OWNER coop ...` does it right.

Standard library only, and no pathlib: the `coop` CLI's cold path loads this module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

FOLDER_MODE = 0o700
FILE_MODE = 0o600
#: The group and other bits: none may be set on a file the product trusts or keeps.
OTHERS_BITS = 0o077
#: The bits that let someone but the owner add, remove or rename names in a folder.
WRITABLE_BY_OTHERS = 0o022
#: What SQLite keeps beside a database in WAL mode.
SQLITE_SIDE_FILES = ("-wal", "-shm")
#: Links followed while walking one path, as the kernel's own bound (ELOOP past it).
MAX_LINK_HOPS = 40

#: Opens of one name that found it made, then removed, before giving up.
OPEN_ATTEMPTS = 10

_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

__all__ = [
    "FILE_MODE",
    "FOLDER_MODE",
    "OTHERS_BITS",
    "SQLITE_SIDE_FILES",
    "ForeignFolder",
    "LinkRefused",
    "NotPrivate",
    "check_backup_target",
    "fsync_folder",
    "lock_file",
    "make_folders",
    "open_at",
    "open_file",
    "open_folder",
    "path_in",
    "private_database",
    "private_file",
    "read_head",
    "refuse_foreign_folder",
    "tighten",
    "trust_problem",
    "write_atomic",
]


class LinkRefused(OSError):
    """A symbolic link where the product writes: refused, never followed."""


class ForeignFolder(PermissionError):
    """Root on a data folder another user owns: run the command as that user."""


class NotPrivate(PermissionError):
    """A folder another user owns or can write, where the product would write."""


def _one_arg(cls: type[OSError], line: str) -> OSError:
    # A one-argument OSError: `str()` is the line itself, and `strerror` is None, so an edge
    # that prints `exc.strerror or exc` prints the line.
    return cls(line)


def _owner_name(uid: int) -> str:
    import pwd  # only when a refusal names someone

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _holds_trusted_links(folder_fd: int) -> bool:
    """Whether a link in this folder was put there by root or the caller: only they can write it."""
    info = os.fstat(folder_fd)
    return info.st_uid in (0, os.geteuid()) and not info.st_mode & WRITABLE_BY_OTHERS


def _names(path: str) -> list[str]:
    return [name for name in path.split("/") if name]


def open_folder(
    path: str | os.PathLike[str], *, make: bool = False, mode: int = FOLDER_MODE
) -> int:
    """A descriptor of the folder `path`, walked from / one name at a time with O_NOFOLLOW; a
    link on the way is followed only where nobody but root and the caller can write the folder
    that holds it (else LinkRefused). With `make`, each missing folder is made with `mode`
    (0700 unless an installer's shared folder says otherwise)."""
    wanted = os.path.abspath(os.fspath(path))
    names = _names(wanted)
    fd = os.open("/", _FOLDER_FLAGS)
    hops = 0
    try:
        while names:
            name = names.pop(0)
            try:
                step = os.open(name, _FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make:
                    raise
                step = _made_folder(fd, name, mode)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(info.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, "not a folder", wanted) from None
                hops += 1
                if hops > MAX_LINK_HOPS or not _holds_trusted_links(fd):
                    raise _one_arg(
                        LinkRefused,
                        f"{wanted}: {name} on the way is a symbolic link in a folder another"
                        " user can write; refused, never followed (name the real folder)",
                    ) from None
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", _FOLDER_FLAGS)
                names[:0] = _names(target)
                continue
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _made_folder(parent_fd: int, name: str, mode: int) -> int:
    """`name` made with `mode` in the folder `parent_fd` (or found made meanwhile), opened."""
    made = True
    try:
        os.mkdir(name, mode, dir_fd=parent_fd)
    except FileExistsError:
        made = False
    fd = os.open(name, _FOLDER_FLAGS, dir_fd=parent_fd)
    if made and os.fstat(fd).st_uid == os.geteuid():
        os.fchmod(fd, mode)  # the umask may have taken bits mkdir asked for: said here
    return fd


def _refuse_link(path: str, exc: OSError) -> OSError:
    if exc.errno == errno.ELOOP:
        return _one_arg(LinkRefused, f"{path} is a symbolic link: refused, never followed")
    return exc


def open_file(
    path: str | os.PathLike[str],
    flags: int,
    mode: int = FILE_MODE,
    *,
    make_folders: bool = False,
    owner: tuple[int, int] | None = None,
) -> int:
    """`path` opened with `flags` relative to its folder's descriptor, never through a link
    (LinkRefused names it). With O_CREAT, a new file is made O_EXCL and gets `mode` (and
    `owner`, a uid and gid) on its descriptor, whatever the umask; an existing one is opened as
    it is, and must be a regular file. `make_folders` makes the missing folders above 0700."""
    text = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(text))
    folder_fd = open_folder(folder, make=make_folders)
    try:
        return _open_in(folder_fd, name, text, flags, mode, owner)
    finally:
        os.close(folder_fd)


def _open_in(
    folder_fd: int, name: str, shown: str, flags: int, mode: int, owner: tuple[int, int] | None
) -> int:
    base = flags | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(OPEN_ATTEMPTS):  # removed between the exclusive open and the plain one
        if flags & os.O_CREAT:
            try:
                fd = os.open(name, base | os.O_EXCL, mode, dir_fd=folder_fd)
            except FileExistsError:
                if flags & os.O_EXCL:
                    found = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
                    if stat.S_ISLNK(found.st_mode):
                        raise _refuse_link(shown, OSError(errno.ELOOP, "a link")) from None
                    raise
            else:
                try:
                    os.fchmod(fd, mode)
                    if owner is not None:
                        os.fchown(fd, *owner)
                except BaseException:
                    os.close(fd)
                    raise
                return fd
        try:
            fd = os.open(name, base & ~(os.O_CREAT | os.O_EXCL), dir_fd=folder_fd)
        except FileNotFoundError:
            if flags & os.O_CREAT:
                continue
            raise
        except OSError as exc:
            raise _refuse_link(shown, exc) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise _one_arg(OSError, f"{shown} is not a regular file: refused")
        return fd
    raise FileNotFoundError(errno.ENOENT, "removed as fast as it was made", shown)


def open_at(
    folder_fd: int,
    name: str,
    flags: int,
    mode: int = FILE_MODE,
    *,
    owner: tuple[int, int] | None = None,
    shown: str | None = None,
) -> int:
    """`open_file` for the name `name` inside the folder already open as `folder_fd` (a
    backup's new folder: no rename of a folder above can redirect it); `shown` names it in a
    refusal."""
    return _open_in(folder_fd, name, shown or name, flags, mode, owner)


def path_in(folder_fd: int, name: str, fallback: str) -> str:
    """A path that reaches `name` in the folder open as `folder_fd` for a library that takes
    only paths (SQLite): through /proc/self/fd, so a rename of the folder meanwhile cannot
    redirect it; `fallback` (the folder's path joined with `name`) where /proc is not mounted."""
    here = f"/proc/self/fd/{folder_fd}"
    return os.path.join(here, name) if os.path.isdir(here) else fallback


def lock_file(path: str | os.PathLike[str], *, make_folders: bool = False) -> int:
    """A lock file's descriptor, read-write, made 0600 when missing, never through a link."""
    return open_file(path, os.O_RDWR | os.O_CREAT, FILE_MODE, make_folders=make_folders)


def read_head(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most `limit` bytes from the start of the regular file `path`, never through a link (a
    lock's holder read by root must not print the first bytes of whatever a link names)."""
    fd = open_file(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def make_folders(folder: str | os.PathLike[str]) -> None:
    """Make `folder` and each missing folder above it 0700 (`os.makedirs` would give the ones
    above the umask's mode). Folders that exist are left as they are."""
    os.close(open_folder(folder, make=True))


def private_file(path: str | os.PathLike[str]) -> None:
    """Make `path` an empty 0600 file unless it exists (made O_EXCL, never through a link); an
    existing one loses its group and other bits (`tighten`)."""
    shown = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(shown))
    folder_fd = open_folder(folder)
    try:
        _private_in(folder_fd, name, shown)
    finally:
        os.close(folder_fd)


def _private_in(folder_fd: int, name: str, shown: str) -> None:
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        os.close(_open_in(folder_fd, name, shown, flags, FILE_MODE, None))
    except FileExistsError:
        _tighten_in(folder_fd, name, shown)


def tighten(path: str | os.PathLike[str]) -> None:
    """Take the group and other bits off the existing data file `path`; LinkRefused for a link
    there, OSError in one line when it is another user's (root excepted); nothing when it is
    gone.

    The file is reached by an O_PATH descriptor, never opened for reading: closing a real
    descriptor of a database would drop every POSIX lock this process's SQLite connections hold
    on it (the kernel ties those locks to the process, not the descriptor), and another
    connection of this process may have the database open. An O_PATH descriptor's close drops
    none, and its mode is changed through /proc/self/fd, which names that very inode."""
    shown = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(shown))
    try:
        folder_fd = open_folder(folder)
    except FileNotFoundError:
        return
    try:
        _tighten_in(folder_fd, name, shown)
    finally:
        os.close(folder_fd)


def _tighten_in(folder_fd: int, name: str, shown: str) -> None:
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except FileNotFoundError:
        return
    try:
        info = os.fstat(fd)  # an O_PATH descriptor of a link is the link's own
        if stat.S_ISLNK(info.st_mode):
            raise _refuse_link(shown, OSError(errno.ELOOP, "a link"))
        _check_owner(info, shown)
        if info.st_mode & OTHERS_BITS:
            mode = stat.S_IMODE(info.st_mode) & ~OTHERS_BITS
            inode = f"/proc/self/fd/{fd}"
            if os.path.exists(inode):
                os.chmod(inode, mode)
            else:  # no /proc: by name, checked a moment ago to be no link
                os.chmod(name, mode, dir_fd=folder_fd)
    finally:
        os.close(fd)


def _check_owner(info: os.stat_result, path: str) -> None:
    me = os.geteuid()
    # Root here is the operator on a folder of its own (the packages' edges refuse it another
    # user's data folder); anyone else handed another user's file may be handed a planted one.
    if info.st_uid != me and me != 0:
        raise _one_arg(
            OSError,
            f"{path} belongs to uid {info.st_uid}, not to uid {me} who runs this: check what it"
            f" holds, then run `chown {me} {path}`",
        )


def private_database(path: str | os.PathLike[str]) -> None:
    """Ready `path` for `sqlite3.connect`: its folders made 0700, the file made 0600 (SQLite then
    makes -wal and -shm alike), an older file's -wal and -shm tightened with it; a link at any
    of the three names refused. One walk to the folder: this runs on every `coop` call."""
    shown = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(shown))
    folder_fd = open_folder(folder, make=True)
    try:
        _private_in(folder_fd, name, shown)
        for suffix in SQLITE_SIDE_FILES:
            _tighten_in(folder_fd, name + suffix, shown + suffix)
    finally:
        os.close(folder_fd)


def write_atomic(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int = FILE_MODE,
    owner: tuple[int, int] | None = None,
) -> None:
    """Put `data` at `path` with `mode` (and `owner`), whole or not at all: written to a fresh
    name in the same folder (O_EXCL, relative to the folder's descriptor: never through a link
    planted there), fsynced, renamed over `path` (a link there is replaced, not followed), and
    the folder fsynced so the rename survives a power cut."""
    text = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(text))
    folder_fd = open_folder(folder, make=True)
    try:
        temporary = f".{name}.{os.urandom(6).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = _open_in(folder_fd, temporary, os.path.join(folder, temporary), flags, mode, owner)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        except BaseException:
            with contextlib.suppress(OSError):  # renamed already, or never there
                os.unlink(temporary, dir_fd=folder_fd)
            raise
        os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename or an unlink in `folder` durable."""
    fd = open_folder(folder)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def trust_problem(info: os.stat_result, path: str | os.PathLike[str], what: str) -> str | None:
    """Why the file `what` at `path`, as `info` (an `fstat` of the open file) shows it, must not
    be trusted, in one line with what to run; None when it is a regular file of this user's
    with no group or other bit. Trusted files are refused, never repaired: one another user
    owns or could read or write may have been replaced."""
    shown = os.fspath(path)
    if not stat.S_ISREG(info.st_mode):
        return f"{what} {shown} is not a regular file"
    me = os.geteuid()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid != me:
        run = f"chown {me} {shown}" + (f" && chmod 600 {shown}" if mode & OTHERS_BITS else "")
        return (
            f"{what} {shown} belongs to uid {info.st_uid}, not to uid {me} who runs "
            f"this; it must be private (0600) to this user: check what it holds, then run `{run}`"
        )
    if mode & OTHERS_BITS:
        return (
            f"{what} {shown} has mode {mode:04o}; it must be private (0600): run"
            f" `chmod 600 {shown}`"
        )
    return None


def _nearest_existing(path: str) -> tuple[str, os.stat_result]:
    where = os.path.abspath(path)
    while True:
        try:
            return where, os.stat(where)
        except (FileNotFoundError, NotADirectoryError):
            parent = os.path.dirname(where)
            if parent == where:
                raise
            where = parent


def refuse_foreign_folder(path: str | os.PathLike[str], command: str) -> None:
    """ForeignFolder when root runs `command` on the data folder `path` (or the nearest folder
    above it that exists) and another user owns it; nothing for anyone else."""
    if os.geteuid() != 0:
        return
    folder, info = _nearest_existing(os.fspath(path))
    if info.st_uid == 0:
        return
    owner = _owner_name(info.st_uid)
    raise _one_arg(
        ForeignFolder,
        f"{folder} belongs to {owner}, not root: run it as that user, `sudo -u {owner} {command}`"
        " (root would follow that user's links, and leave files the service cannot open)",
    )


def check_backup_target(path: str | os.PathLike[str]) -> None:
    """NotPrivate unless the folder `path` (or the nearest folder above it that exists) is the
    caller's or root's and nobody else can write it, and no folder above it lets anyone else
    rename what it holds: another user could otherwise rename the backup's folder away and put a
    link of theirs in its place (OpenSSH's StrictModes walk)."""
    folder, info = _nearest_existing(os.fspath(path))
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", folder)
    _private_folder(folder, info)
    above = folder
    while (parent := os.path.dirname(above)) != above:
        above = parent
        found = os.stat(above)
        if not found.st_mode & stat.S_ISVTX:  # a sticky folder (/tmp) lets none rename ours
            _private_folder(above, found)


def _private_folder(folder: str, info: os.stat_result) -> None:
    if info.st_uid not in (0, os.geteuid()):
        raise _one_arg(
            NotPrivate,
            f"{folder} belongs to {_owner_name(info.st_uid)}: a backup goes only into a folder of"
            " the user who runs it (or root's) that nobody else can write",
        )
    if info.st_mode & WRITABLE_BY_OTHERS:
        raise _one_arg(
            NotPrivate,
            f"{folder} has mode {stat.S_IMODE(info.st_mode):04o}: others can write it, so a"
            f" backup could be redirected; use a private folder (`chmod go-w {folder}`)",
        )
