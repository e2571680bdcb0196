"""A service taking its address at start, and the one line it prints when it cannot: the same
shape for the door (`chief serve`), `coop serve` and the emulator (`chief telegram-emulator`).

    PROG: cannot listen on WHERE (SETTING): WHY; WHAT TO DO

WHERE is the socket's path or `host:port`, SETTING the setting or option that chose it, WHY the
operating system's own words (`Address already in use`, never `[Errno 98]`) or the check that
refused it (`plumbing.unix.bind_private`: a live holder, a folder others can write). Each service
binds before it logs a line saying it started, so the refusal is the only line it prints.

Standard library only.
"""

from __future__ import annotations

import errno
import socket

#: The backlog of every listening socket the services bind themselves.
LISTEN_BACKLOG = 128


class CannotListen(Exception):
    """The address could not be taken; `message` is the line after `PROG: `."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def reason(exc: BaseException) -> str:
    """An error's own words: an OSError's `strerror` (`Address already in use`), else its text."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def bind_tcp(host: str, port: int, setting: str, advice: str) -> socket.socket:
    """A listening TCP socket on `host:port` (SO_REUSEADDR: a port left in TIME_WAIT by the
    last run is taken again), or `CannotListen` naming the address, `setting` and `advice`."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise CannotListen(refusal(where, setting, exc, advice)) from exc
    return sock


def bind_socket(path: str, setting: str) -> socket.socket:
    """The service's Unix socket at `path` (`plumbing.unix.bind_private`: 0600, in a folder of
    this user's nobody else can write, a stale one replaced, a live one refused), or
    `CannotListen` naming the path, `setting` and what to do."""
    from plumbing.unix import bind_private

    try:
        return bind_private(path)
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            advice = f"stop that process first, or set {setting} to another path"
        else:
            advice = f"or set {setting} to a path in a folder only this user can write"
        raise CannotListen(refusal(path, setting, exc, advice)) from exc


def refusal(where: str, setting: str, exc: BaseException, advice: str) -> str:
    """The line (after `PROG: `) for an address that could not be taken."""
    return f"cannot listen on {where} ({setting}): {reason(exc)}; {advice}"
