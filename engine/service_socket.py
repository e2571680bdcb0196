"""Where the engine service (`coop serve`) listens, and the one way the engine calls it.

`coop serve` serves its app on a Unix socket only: `COOP_SERVICE_SOCKET`, default
`<COOP_HOME>/service.sock`, in the private data folder, so only the service's user can create
it. A TCP port on loopback proved nothing about who answers: whoever listened on it while the
service was down received the owner credential. (Prometheus's read-only `/metrics` stays on TCP,
`COOP_METRICS_PORT`: `notifier.engine_service`.)

    socket_path(environ)       COOP_SERVICE_SOCKET, else <data folder>/service.sock
    refuse_tcp_settings(env)   the settings that named a TCP address (COOP_SERVICE_URL,
                               COOP_SERVICE_PORT, COOP_SERVICE_HOST): one line, what to set now
    connect(path, timeout_s)   a connection to the service, made only through
                               `plumbing.unix.connect_checked` (the folder and the socket are
                               this user's and private, the kernel names the answering uid)
    exchange(connection, ...)  one request on it: (status, body)
    call(path, method, target, ...)   the two at once

A call that cannot be checked or connected raises `ServiceNotRunning` (nothing listens: a
missing socket or folder, or a socket nobody holds) or `ServiceNotTrusted` (the folder or the
socket is not private to this user, or another user answers), both `OwnerUnavailable`
(engine.errors) whose one line says nothing was sent. Any failure after the connect raises
`OSError` (or `http.client.HTTPException`) as the standard library does: the request may have
arrived.

Standard library only (http.client, plumbing): the `coop` CLI imports this after a cutover.
"""

from __future__ import annotations

import http.client
import os

from engine.errors import ServiceNotRunning, ServiceNotTrusted, UsageError
from plumbing import service, unix

# `typing` stays off the CLI's cold path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Mapping

#: The settings of the TCP era, each with what replaced it.
TCP_SETTINGS = {
    "COOP_SERVICE_URL": "set COOP_SERVICE_SOCKET (default <COOP_HOME>/service.sock)",
    "COOP_SERVICE_PORT": "set COOP_METRICS_PORT for Prometheus's /metrics, the one route left"
    " on TCP",
    "COOP_SERVICE_HOST": "set COOP_SERVICE_SOCKET for the service, COOP_METRICS_PORT for"
    " /metrics (always on 127.0.0.1)",
}
#: The Host header of a call over the socket: a loopback name, as the service's guard wants.
SOCKET_HOST = "localhost"


def socket_path(environ: Mapping[str, str] | None = None) -> str:
    """`COOP_SERVICE_SOCKET` (absolute), else `service.sock` in the data folder
    (`plumbing.service`, the door's link derives it the same way)."""
    env = os.environ if environ is None else environ
    try:
        return service.socket_path(env)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def refuse_tcp_settings(environ: Mapping[str, str] | None = None) -> None:
    """Raise `UsageError` naming the first TCP-era setting still set, and what to set instead."""
    env = os.environ if environ is None else environ
    for name, instead in TCP_SETTINGS.items():
        if env.get(name, "").strip():
            raise UsageError(
                f"{name} is no longer read: coop serve listens on a Unix socket; {instead};"
                f" remove {name}"
            )


class SocketConnection(http.client.HTTPConnection):
    """`http.client`'s connection over the service's Unix socket, connected only after
    `plumbing.unix.connect_checked` has proved who answers."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__(SOCKET_HOST, timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock: socket.socket = checked_socket(self.path, self.timeout)


def checked_socket(path: str, timeout: float | None) -> socket.socket:
    """A socket connected to the service at `path`, proved private and this user's; raises
    `ServiceNotRunning` or `ServiceNotTrusted` before anything is sent."""
    try:
        return unix.connect_checked(path, timeout)
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
        raise ServiceNotRunning(
            f"Coop owner unavailable: coop serve is not running (nothing listens at {path});"
            " nothing was sent"
        ) from exc
    except PermissionError as exc:
        raise ServiceNotTrusted(f"Coop owner refused: {exc}") from exc


def connect(path: str, timeout_s: float) -> SocketConnection:
    """A connection to the service at `path`, made and checked now (nothing sent yet); raises
    `ServiceNotRunning` or `ServiceNotTrusted`."""
    connection = SocketConnection(path, timeout_s)
    connection.connect()
    return connection


def exchange(
    connection: SocketConnection,
    method: str,
    target: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request on a connection `connect` made: (status, body); else `OSError`, or
    `http.client.HTTPException` for an answer that is not HTTP."""
    connection.request(method, target, body=body, headers=dict(headers or {}))
    response = connection.getresponse()
    return response.status, response.read()


def call(
    path: str,
    method: str,
    target: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> tuple[int, bytes]:
    """One request to the service at `path` on a fresh checked connection: (status, body)."""
    connection = connect(path, timeout_s)
    try:
        return exchange(connection, method, target, body, headers)
    finally:
        connection.close()
