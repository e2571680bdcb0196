"""Waking after a commit, without polling: the notifier, and the waiters of `coop request
wait`. Standard library only.

The notifier. A producer that committed an outbox row calls `kick(db)`. If a notifier daemon
listens on the Unix datagram socket beside the store, one datagram wakes it. If nothing
listens, a detached one-shot drainer (`python -m notifier drain`) is spawned; it wins or loses
the worker lock and drains until the idle handoff releases it.

The waiters. A `coop request wait N` (and `engine.ledger.wait_request`) binds a Unix datagram
socket of its own (`Waiter`) in the folder `<coop.db>.waiters/` (0700, made by the first waiter,
removed by the last one out), named for its request (`<N>.<pid>.<random>`), and only THEN reads
the request: a close that commits before the bind is seen by the read, one after it finds the
socket. Every commit whose answer shows request N closed or abandoned is followed by
`wake_waiters(db, N)`: one datagram to each socket named for N, and the waiter reads the
request again. (An amend of a closed request wakes too, and nobody: no waiter waits for a
closed request; a take or a release settles nothing and wakes nobody.) Cheap when nobody
waits: one `listdir` that fails, and no `socket` import. A socket that refuses the datagram
belongs to a waiter that died without cleaning up (SIGKILL); the waker removes it, and the
folder if that leaves it empty.

Who calls what, after the commit and never inside it:

- `after_commit(db, answer)`: every local commit, in `engine.api`, the one place it happens
  (the CLI and library callers alike): `kick` when the answer queued an outbox row, and
  `wake_waiters` for the request the answer shows settled (`settled_request`), whatever
  `COOP_KICK` says (it chooses how the notifier is woken, not whether a waiter is);
- the owner service (after `coop cutover`) kicks its in-process daemon after a committed call,
  then calls `wake_waiters(db, settled_request(answer))` itself (`engine.owner.app`); so does
  any other path of the service that commits a settled request (an answer from the phone);
- a call shipped to the owner kicks and wakes nothing here.

`COOP_KICK` chooses: `auto` (default: datagram, else spawn), `datagram` (never spawn), `off`
(for tests of the ledger alone and for operators draining by hand).
"""

from __future__ import annotations

import contextlib
import os
import sys

from plumbing import files

# Off the CLI's cold path: `pathlib` (annotations only) and `socket` (imported by the one
# function that sends: with COOP_KICK=off a verb never loads it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from pathlib import Path

KICK_MODES = ("auto", "datagram", "off")
# sun_path holds 108 bytes on Linux; a longer path falls back to a hashed name in /tmp.
MAX_SOCKET_PATH_BYTES = 100


def socket_file(db: str | os.PathLike[str]) -> str:
    """`socket_path()` as text, for the CLI's path (no pathlib)."""
    path = os.path.realpath(db) + ".kick"
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES:
        return path
    import hashlib  # rare, and openssl's import costs a cold CLI ~5 ms

    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return f"/tmp/coop-kick-{digest}.sock"  # noqa: S108 - a name derived from the store


def socket_path(db: str | os.PathLike[str]) -> Path:
    """The daemon's kick socket: `<db>.kick` beside the store."""
    from pathlib import Path

    return Path(socket_file(db))


def kick_mode(mode: str | None = None) -> str:
    """`mode`, else `COOP_KICK` (default `auto`); a wrong value raises ValueError naming it."""
    mode = mode or os.environ.get("COOP_KICK", "auto")
    if mode not in KICK_MODES:
        raise ValueError(f"COOP_KICK must be one of {', '.join(KICK_MODES)}, not {mode!r}")
    return mode


def kick(db: str | os.PathLike[str], mode: str | None = None) -> str:
    """Wake the daemon or spawn a one-shot drainer; return what was done (for logs and tests)."""
    mode = kick_mode(mode)
    if mode == "off":
        return "off"
    if send_datagram(db):
        return "datagram"
    if mode == "datagram":
        return "nobody-listening"
    spawn_drainer(db)
    return "spawned"


def send_datagram(db: str | os.PathLike[str]) -> bool:
    """One datagram to the daemon; False when no daemon listens."""
    import socket  # a kick's only: ~8 ms of a cold start that kicks nothing (COOP_KICK=off)

    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        try:
            sock.sendto(b"kick", os.fsencode(socket_file(db)))
        except BlockingIOError:
            return True  # the daemon's queue is full: it is awake and will drain anyway
        except OSError:
            return False
    return True


def spawn_drainer(db: str | os.PathLike[str]) -> None:
    """A detached one-shot drainer; it outlives this process and takes no terminal.

    Spawned through a shell that backgrounds it and exits at once (waited for here), so the
    drainer is re-parented to init: a long-running library caller collects no zombie per kick.
    """
    import subprocess  # only when no daemon listens: the common path is one datagram

    env = dict(os.environ, COOP_DB=os.fspath(db))
    # Its log lines go beside the store, where an operator looks for them: 0600 whatever the
    # umask (they name rows and the door), never through a link planted at the name.
    log_path = os.fspath(db) + ".drainer.log"
    files.private_file(log_path)
    log = files.open_file(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, files.FILE_MODE)
    try:
        launcher = subprocess.Popen(
            [
                "/bin/sh",
                "-c",
                '"$@" &',
                "coop-kick",
                sys.executable,
                "-P",
                "-m",
                "notifier",
                "drain",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(log)
    launcher.wait()


# ---- the waiters of `coop request wait` ----------------------------------------------------

#: A request closed or abandoned: what a waiter waits for.
SETTLED_STATUSES = ("closed", "abandoned")
#: The longest waiter's socket name (`<id>.<pid>.<8 hex>`, an id of up to 20 characters).
MAX_WAITER_NAME_BYTES = 40
#: What a wake says; the waiter reads the request again whatever it says.
WAKE = b"settled"


def waiters_folder(db: str | os.PathLike[str]) -> str:
    """The waiters' folder: `<db>.waiters` beside the store, or, where a socket path there
    would not fit in `sun_path`, a folder in /tmp named by a hash of that path."""
    folder = os.path.realpath(db) + ".waiters"
    raw = os.fsencode(folder)
    if len(raw) + 1 + MAX_WAITER_NAME_BYTES <= MAX_SOCKET_PATH_BYTES:
        return folder
    # Every settling commit computes this: a checksum, not `hashlib` (~5 ms of a cold start).
    # The name only has to be the same in every process; `_private_folder` checks its owner.
    from binascii import crc32

    digest = f"{crc32(raw):08x}{crc32(raw[::-1]):08x}"
    return f"/tmp/coop-waiters-{digest}"  # noqa: S108 - a name derived from the store


def settled_request(answer: object) -> int | None:
    """The id of the request an answer shows closed or abandoned (`{"request": {...}}`, as the
    request verbs and the phone's answer return it), else None."""
    row = answer.get("request") if isinstance(answer, dict) else None
    if not isinstance(row, dict) or row.get("status") not in SETTLED_STATUSES:
        return None
    found = row.get("id")
    return found if isinstance(found, int) else None


def wakes_notifier(answer: object) -> bool:
    """Whether a commit's answer needs the notifier: it queued an outbox row, or it shows an
    open request with a deadline (the daemon sleeps until the earliest one, and a request filed
    to anyone but the owner queues no row when it is filed)."""
    if not isinstance(answer, dict):
        return False
    if answer.get("outbox_id"):
        return True
    row = answer.get("request")
    return (
        isinstance(row, dict)
        and row.get("deadline_at") is not None
        and row.get("status") not in SETTLED_STATUSES
    )


def after_commit(db: str | os.PathLike[str], answer: object, mode: str | None = None) -> str:
    """What follows a local commit: the notifier's kick when `answer` queued an outbox row or
    filed a deadline (`wakes_notifier`; `mode` as `kick`), then the waiters of the request it
    settled. Returns what the kick did ("none" when the answer needs no notifier)."""
    kicked = "none"
    if wakes_notifier(answer):
        kicked = kick(db, mode)
    settled = settled_request(answer)
    if settled is not None:
        wake_waiters(db, settled)
    return kicked


def wake_waiters(db: str | os.PathLike[str], request_id: int | None = None) -> int:
    """One datagram to each waiter of `request_id` (None: every waiter); how many were sent.
    A socket that refuses it is a dead waiter's, and is removed. Never raises: a wake that
    cannot be sent leaves a waiter to its recheck (`Waiter.RECHECK_S`)."""
    folder = waiters_folder(db)
    try:
        names = os.listdir(folder)
    except OSError:
        return 0  # nobody waits (the common case): no socket import
    prefix = "" if request_id is None else f"{request_id}."
    names = [name for name in names if name.startswith(prefix)]
    if not names:
        return 0
    import socket

    sent = 0
    dead = False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        for name in names:
            path = os.path.join(folder, name)
            try:
                sock.sendto(WAKE, os.fsencode(path))
            except BlockingIOError:
                pass  # its queue is full: it has wakes to read already
            except ConnectionRefusedError:
                _remove(path)  # nobody reads there: its waiter died without cleaning up
                dead = True
                continue
            except OSError:
                continue  # gone meanwhile (its waiter left), or not a socket
            sent += 1
    if dead:
        # The dead waiter may have been the last one: leave no empty folder behind (a waiter
        # binding meanwhile finds it gone and makes it again).
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    return sent


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _private_folder(folder: str) -> None:
    """Make the waiters' folder (0700) unless it exists; refuse one that is not a folder of
    this user's (in /tmp, anyone could have made it first). The store's own folder is made if
    missing, as opening the store would: a wait on a ledger not yet made then answers as
    `request show` does (no such request), not with a missing folder."""
    files.make_folders(os.path.dirname(folder))
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, files.FOLDER_MODE)
    import stat

    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        import errno

        raise PermissionError(errno.EPERM, "not a folder of this user's for waiters", folder)
    if info.st_mode & files.OTHERS_BITS:
        fd = files.open_folder(folder)  # on its descriptor: never through a link at the name
        try:
            os.fchmod(fd, files.FOLDER_MODE)
        finally:
            os.close(fd)


class Waiter:
    """A waiter's socket for one request, bound on entry and removed on exit (a return, an
    exception, Ctrl-C), with the folder when it was the last one in it.

        with Waiter(db, request_id) as waiter:   # bound: a settling commit now finds it
            while not settled(read()):
                waiter.wait(timeout_s)           # True when a wake came
    """

    #: A wait reads the request again at least this often even if no wake comes: a wake that
    #: cannot reach the folder (a committer of another user, or an older `coop`) costs at most
    #: this, never the whole timeout. It is no poll: every wake is a commit's datagram.
    RECHECK_S = 60.0

    def __init__(self, db: str | os.PathLike[str], request_id: int) -> None:
        self.folder = waiters_folder(db)
        self.request_id = request_id
        self.path: str | None = None
        self._sock: socket.socket | None = None

    def __enter__(self) -> Waiter:
        import socket

        for _ in range(3):  # the last waiter may remove the folder between our mkdir and bind
            _private_folder(self.folder)
            name = f"{self.request_id}.{os.getpid()}.{os.urandom(4).hex()}"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sock = sock
            self.path = os.path.join(self.folder, name)
            try:
                sock.bind(self.path)
                # A socket file takes the umask's mode; its 0700 folder already keeps others out,
                # and the file says so too.
                os.chmod(self.path, files.FILE_MODE)
                return self
            except FileNotFoundError:
                sock.close()
            except BaseException:
                self.close()
                raise
        raise FileNotFoundError(2, "the waiters' folder keeps vanishing", self.folder)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, timeout_s: float) -> bool:
        """Block until a wake comes (True) or `timeout_s` passes (False); every wake already
        queued is read too, so a burst of commits costs one read of the request."""
        sock = self._sock
        assert sock is not None, "wait() outside `with Waiter(...)`"
        sock.settimeout(max(0.0, min(timeout_s, self.RECHECK_S)))
        try:
            sock.recv(64)
        except (TimeoutError, BlockingIOError):  # BlockingIOError: a timeout of 0
            return False
        sock.setblocking(False)
        try:
            while sock.recv(64):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        if self.path is not None:
            _remove(self.path)
            self.path = None
            with contextlib.suppress(OSError):
                os.rmdir(self.folder)  # only when it is empty: the last waiter out
