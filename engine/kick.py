"""Waking the notifier after a commit, without polling: standard library only.

A producer that committed an outbox row calls `kick(db)`. If a notifier daemon listens on the
Unix datagram socket beside the store, one datagram wakes it. If nothing listens, a detached
one-shot drainer (`python -m notifier drain`) is spawned; it wins or loses the worker lock and
drains until the idle handoff releases it.

Producers do not call it themselves: every public function that commits an outbox row (or
re-arms, cancels or frees one) kicks after its commit in `engine.api`, the one place the kick
happens, so a program using the Python API wakes the notifier exactly as the `coop` CLI does.
In service mode the owner service kicks its in-process daemon after the command's filing
commits; a call shipped to the owner kicks nothing here.

`COOP_KICK` chooses: `auto` (default: datagram, else spawn), `datagram` (never spawn), `off`
(for tests of the ledger alone and for operators draining by hand).
"""

from __future__ import annotations

import os
import sys

# Off the CLI's cold path: `pathlib` (annotations only) and `socket` (imported by the one
# function that sends: with COOP_KICK=off a verb never loads it).
TYPE_CHECKING = False
if TYPE_CHECKING:
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
    # Its log lines go beside the store, where an operator looks for them.
    with open(os.fspath(db) + ".drainer.log", "ab") as log:
        launcher = subprocess.Popen(
            ["/bin/sh", "-c", '"$@" &', "coop-kick", sys.executable, "-m", "notifier", "drain"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    launcher.wait()
