"""Raw loopback HTTP for the tests of what a server does before it reads: a request whose body
is sent only while the server still reads it, and sockets held open without a request.

    status = send_body(port, "POST", "/path", size=64 << 20, chunked=False)
    with IdleSockets(port, count=250) as idle: ...   # connected, nothing sent
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from types import TracebackType

CHUNK_BYTES = 256 * 1024
SEND_DEADLINE_S = 60.0


def _status_of(sock: socket.socket) -> int:
    """The status code of the answer waiting on `sock` (0 when the server closed without one)."""
    head = b""
    while b"\r\n" not in head:
        try:
            more = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            break
        if not more:
            break
        head += more
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _connect(port: int | str) -> socket.socket:
    """A connection to a loopback port, or to a Unix socket's path."""
    if isinstance(port, int):
        return socket.create_connection(("127.0.0.1", port), timeout=SEND_DEADLINE_S)
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(port)  # blocking: it waits for a place in a full accept queue (EAGAIN otherwise)
    sock.settimeout(SEND_DEADLINE_S)
    return sock


def send_body(
    port: int | str,
    method: str,
    path: str,
    *,
    size: int,
    chunked: bool,
    headers: dict[str, str] | None = None,
) -> int:
    """Send `method path` with a body of `size` bytes (`Content-Length`, or chunked framing),
    stopping as soon as the server answers; the answer's status code.

    The body goes out only while the socket is writable and nothing has come back, so a server
    that answers after the headers costs the sender next to nothing, and one that reads the
    whole body first is sent all of it. `port` a text: the path of a Unix socket."""
    host = "localhost" if isinstance(port, str) else f"127.0.0.1:{port}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
    chunk = b"x" * CHUNK_BYTES
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk
    deadline = time.monotonic() + SEND_DEADLINE_S
    with _connect(port) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent = 0
        while sent < size and time.monotonic() < deadline:
            ready = dict(_poll([sock], select.POLLIN | select.POLLOUT, 1.0))
            found = ready.get(sock, 0)
            readable = found & (select.POLLIN | select.POLLHUP | select.POLLERR)
            writable = found & select.POLLOUT
            if readable:
                return _status_of(sock)
            if writable:
                try:
                    sock.sendall(framed)
                except (BrokenPipeError, ConnectionResetError):
                    return _status_of(sock)
                sent += CHUNK_BYTES
        if chunked:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b"0\r\n\r\n")
        return _status_of(sock)


def _poll(
    sockets: list[socket.socket], events: int, timeout_s: float
) -> list[tuple[socket.socket, int]]:
    """`select.poll` over `sockets` (no FD_SETSIZE limit: a test may hold a thousand)."""
    poller = select.poll()
    by_fd = {sock.fileno(): sock for sock in sockets}
    for fd in by_fd:
        poller.register(fd, events)
    return [(by_fd[fd], found) for fd, found in poller.poll(timeout_s * 1000)]


class IdleSockets:
    """`count` connections to `port` (a loopback TCP port, or a Unix socket's path) that never
    send a request, held until the block ends."""

    def __init__(self, port: int | str, count: int) -> None:
        self.port = port
        self.count = count
        self.sockets: list[socket.socket] = []

    def __enter__(self) -> IdleSockets:
        for _ in range(self.count):
            self.sockets.append(self._connect())
        return self

    def _connect(self) -> socket.socket:
        if isinstance(self.port, int):
            return socket.create_connection(("127.0.0.1", self.port), timeout=5.0)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Blocking: a Unix connect with a timeout fails at once (EAGAIN) while the service's
            # accept queue is full; a blocking one waits in the kernel for a place, as the
            # project's own clients do (plumbing.unix.connect_checked).
            sock.connect(self.port)
            sock.settimeout(5.0)
        except BaseException:
            sock.close()
            raise
        return sock

    def closed_by_server(self) -> int:
        """How many of them the server has closed (readable, and reading gives end of file)."""
        closed = 0
        for sock, _ in _poll(self.sockets, select.POLLIN, 0.0):
            try:
                closed += sock.recv(1, socket.MSG_PEEK) == b""
            except ConnectionResetError:
                closed += 1
        return closed

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for sock in self.sockets:
            sock.close()
