"""A service's Unix socket in its private folder, and the checks that make it a proof of who
answers.

A TCP port on loopback is first come, first served: whoever listens on it when a service is
down (a restart, an upgrade, a crash) receives what its clients send, keys included. A Unix
socket in a folder that only the service's user may write can be created by that user alone, so
a client that finds one there, owned by that user, is talking to that user's process; and the
kernel tells the service which user is calling (`SO_PEERCRED`), so no header has to.

    bind_private(path)      the service's listening socket, 0600, in a folder of its user's that
                            no one else can write; a stale socket of a dead holder is replaced,
                            a live one refused
    check_private(path)     a client's check before it sends a byte: the folder is the user's
                            and private to writes, the socket is the user's
    peer_uid(sock)          the uid of the process at the other end of a connected socket
    connect_checked(path)   a connected stream socket to `path`, after `check_private` and with
                            the peer's uid confirmed (for the standard library's HTTP client);
                            it waits its turn in a full accept queue (`TimeoutError` after
                            its timeout), as a TCP client does

Errors are built-in ones with one line a package can print as it is: `FileNotFoundError`
(nothing listens there: the service is not running), `PermissionError` (the folder or the socket
is not private to this user: nothing is sent), `ConnectionRefusedError` (a socket file nobody
holds). Standard library only, and no pathlib: the `coop` CLI's cold path may load it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct

#: The deepest path a Unix socket address holds on Linux (`sun_path`, less its NUL).
MAX_PATH_BYTES = 107
#: Group and other write bits: a folder with any of them lets another user replace a socket.
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH
#: `struct ucred` as `SO_PEERCRED` returns it: pid, uid, gid.
_UCRED = struct.Struct("3i")


def check_private(path: str, uid: int | None = None) -> None:
    """Return when `path` is a socket of `uid`'s (default: this process's effective user) in a
    folder that `uid` owns and nobody else may write; else raise (see the module docstring).

    The folder is what makes it a proof: only its owner can create or replace an entry in it, so
    between this check and the connect nobody else can put another socket there."""
    uid = os.geteuid() if uid is None else uid
    folder = os.path.dirname(os.path.abspath(path))
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"nothing listens at {path}: its folder {folder} does not exist"
        ) from None
    if info.st_uid != uid or info.st_mode & _OTHERS_WRITE:
        raise PermissionError(
            f"{folder} (holding the socket {path}) belongs to uid {info.st_uid} with mode "
            f"{stat.S_IMODE(info.st_mode):04o}; a service's socket must be in a folder of uid "
            f"{uid}'s that no one else can write: nothing was sent"
        )
    try:
        sock_info = os.lstat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"nothing listens at {path}: is the service running?") from None
    if not stat.S_ISSOCK(sock_info.st_mode):
        raise PermissionError(f"{path} is not a socket: nothing was sent")
    if sock_info.st_uid != uid:
        raise PermissionError(
            f"the socket {path} belongs to uid {sock_info.st_uid}, not to uid {uid}: nothing "
            "was sent"
        )


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process that holds the other end of the connected Unix socket `sock`."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(creds)[1])


def connect_checked(
    path: str, timeout: float | None = None, uid: int | None = None
) -> socket.socket:
    """A stream socket connected to the service at `path`, after `check_private(path, uid)` and
    with the listening process confirmed as `uid`'s by the kernel; raises as the module says."""
    uid = os.geteuid() if uid is None else uid
    check_private(path, uid)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect_in_turn(sock, path, timeout)
        sock.settimeout(timeout)
        answering = peer_uid(sock)
        if answering != uid:
            raise PermissionError(
                f"the process answering at {path} runs as uid {answering}, not uid {uid}: "
                "nothing was sent"
            )
    except BaseException:
        sock.close()
        raise
    return sock


def _connect_in_turn(sock: socket.socket, path: str, timeout: float | None) -> None:
    """Connect, waiting up to `timeout` for a place in the service's queue of connections not
    yet accepted. A Unix socket's connect fails at once with EAGAIN when that queue is full (a
    flood of connections ahead of it; a TCP client's connect retries instead), and Python's
    connect with a timeout is a non-blocking one: so the connect blocks, and the kernel wakes it
    when a place frees, within `SO_SNDTIMEO`."""
    if timeout is not None:
        wait = max(timeout, 0.001)
        whole = int(wait)
        when = struct.pack("@ll", whole, int((wait - whole) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, when)
    sock.setblocking(True)
    try:
        sock.connect(path)
    except BlockingIOError:
        raise TimeoutError(
            f"the service at {path} took no new connection within {timeout:g} s (its queue was "
            "full all that time)"
        ) from None
    if timeout is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("@ll", 0, 0))


def bind_private(path: str, backlog: int = 128) -> socket.socket:
    """The listening socket for a service at `path`, mode 0600, in a folder of this user's that
    nobody else can write (else `PermissionError`). A socket left by a holder that is gone is
    replaced; one that answers raises `OSError(EADDRINUSE)` naming it."""
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise ValueError(
            f"the socket path {path} is longer than the {MAX_PATH_BYTES} bytes a Unix socket "
            "address holds: choose a shorter folder"
        )
    folder = os.path.dirname(os.path.abspath(path))
    info = os.stat(folder)
    uid = os.geteuid()
    if info.st_uid != uid or info.st_mode & _OTHERS_WRITE:
        raise PermissionError(
            f"{folder} belongs to uid {info.st_uid} with mode {stat.S_IMODE(info.st_mode):04o}; "
            f"a service's socket needs a folder of uid {uid}'s that no one else can write "
            f"(chmod 700 {folder})"
        )
    _remove_stale(path, uid)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # The mode comes from the umask at bind; chmod on the path afterwards would leave a window
        # (and fchmod on a socket's descriptor does not change the file).
        old_umask = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old_umask)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def _remove_stale(path: str, uid: int) -> None:
    """Remove a socket at `path` that nothing holds; refuse anything else found there."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid != uid:
        raise FileExistsError(
            f"{path} exists and is not a socket of this user's: move it away, then start again"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"another process already answers at {path}")
