"""How many connections a loopback server holds, how long one may take to ask, and how far it
is read ahead of its answers.

uvicorn bounds neither well enough for a service a stray local client can reach: its
`limit_concurrency` counts idle connections, so a few hundred sockets that never send a request
make every real request a 503, and its only timer (`timeout_keep_alive`) runs between requests,
never before the first. The gate sits in front of uvicorn's own HTTP protocol through public
hooks only (a protocol class for `uvicorn.Config(http=...)`, and an ASGI wrapper) and keeps, per
server:

1. A request deadline. A connection must send a complete request (its headers, and its body
   when it has one) within `request_deadline_s` of opening, or of its last response; else it is
   closed. A request is complete once the app has its whole body, or has answered. A kept-alive
   connection that asked, was answered and went quiet is closed the same way (as uvicorn would),
   counted as "idle" and never warned of: every client leaves those. Answers left unread for as
   long (the write buffer past its high-water mark) abort the connection ("unread").
2. A cap. At most `max_connections` live at once. A new connection at the cap takes the place of
   the one quiet longest: nothing sent since it opened or since its last answer, and nothing
   waiting unread in its socket. A connection that has sent any byte of a request is never
   evicted (the deadline still closes a slow sender), so a flood of connections cannot fail a
   request under way; the newest go last, a client that has just connected being about to send.
   When every connection is sending or in the app, the new one is closed instead. There is no
   share per peer: on TCP every local client is 127.0.0.1, and on a Unix socket every admitted
   caller is the server's own uid, so such a share would divide nothing.
3. Flow control. A connection whose answers are unread is not read further. uvicorn is handed a
   connection's bytes only while no complete request of it is in the app, its answers are not
   waiting in the transport's write buffer (past the high-water mark), and uvicorn itself has
   not asked for a pause (it holds a whole next request). Meanwhile the gate reads on and holds
   up to `HOLD_LIMIT_BYTES` (so a client that hangs up while the app works is still seen), then
   stops reading the socket. uvicorn's own protocols leave this open: they resume reading
   whenever an answer completes or the app awaits a message, however full the write buffer
   (one pipelining client that never read grew a service by a gigabyte in seconds). The gate
   runs uvicorn's h11 protocol, which parses one request at a time and keeps the rest as bytes;
   its httptools protocol parses everything it is handed and queues each request as objects.
   The gate alone moves the socket's reading: uvicorn's protocol sees the transport through a
   wrapper whose pause and resume are requests to the gate.

On a Unix socket the kernel names the caller: a connection from any uid but the server's own is
closed at once (shed as "stranger"), before uvicorn sees a byte. The socket's mode already keeps
others out; this holds when the socket or its folder is opened to them by mistake.

The two halves meet by the connection itself, not by an address (a Unix socket's peer has none):
the protocol half sets `_CONNECTION` (a context variable) to its connection before it hands
bytes to uvicorn, and the task uvicorn creates for a request copies the context it was created
in (asyncio's documented rule), so the ASGI half reads its own connection there. A pipelined
request's task is created from the previous request's task, on the same connection. What the
gate sheds is counted, and said in one log line at most every `SHED_LOG_INTERVAL_S`, never a
line per connection.
"""

from __future__ import annotations

import asyncio
import contextvars
import fcntl
import os
import socket
import sys
import termios
import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from typing import Any, cast

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from plumbing.unix import peer_uid

log = structlog.get_logger("loopback_server")

#: Live connections per server. Each is a file descriptor and at most one request in the app.
MAX_CONNECTIONS = 200
#: A complete request within this long of the connection opening or its last answer; the same
#: as uvicorn's keep-alive timeout, so a client's idle keep-alive connection lives as long as
#: it did.
REQUEST_DEADLINE_S = 5.0
SHED_LOG_INTERVAL_S = 60.0
#: Shed reasons counted but never warned of: what any client's ordinary use leaves.
QUIET_REASONS = frozenset({"idle"})
#: Bytes a connection may send ahead of what uvicorn may take: read and held (a client that
#: hangs up while the app works is still seen), then the socket is not read until it may.
HOLD_LIMIT_BYTES = 64 * 1024


class _Connection:
    """One live connection as the gate sees it."""

    __slots__ = ("busy", "idle_since", "ready", "sent", "served", "timer", "transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.idle_since = time.monotonic()  # opened, or last answered
        self.busy = False  # a complete request is in the app
        self.served = 0  # requests answered on it
        self.timer: asyncio.TimerHandle | None = None
        self.sent = False  # a byte of a request came since it opened or was last answered
        self.ready: Callable[[], None] = _nothing  # told when `busy` clears


def _nothing() -> None:
    pass


#: The connection whose bytes uvicorn's protocol is handling (set by the protocol half; read by
#: the ASGI half in the request's task, which copied it). Not a decision of where code runs: the
#: one seam between uvicorn's protocol and the app that carries no identity of the connection.
_CONNECTION: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar(
    "loopback_server_connection", default=None
)


class ConnectionGate:
    """The cap and the request deadline of one server (see the module docstring)."""

    def __init__(
        self,
        max_connections: int = MAX_CONNECTIONS,
        request_deadline_s: float = REQUEST_DEADLINE_S,
    ) -> None:
        self.max_connections = max_connections
        self.request_deadline_s = request_deadline_s
        self.live: set[_Connection] = set()
        #: What the gate shed, by reason: "evicted", "refused" (all sending or busy),
        #: "timed_out" (no complete request in time), "idle" (a kept-alive connection quiet
        #: after its answers), "unread" (answers unread in time), "stranger" (a Unix socket's
        #: caller running as another user).
        self.shed = dict.fromkeys(
            ("evicted", "refused", "timed_out", "idle", "unread", "stranger"), 0
        )
        self._logged_shed = dict(self.shed)
        self._logged_at = -SHED_LOG_INTERVAL_S

    # -- the transport side ------------------------------------------------------------------

    def admit(self, transport: asyncio.Transport) -> _Connection | None:
        """A new connection: its record, or None when it is to be closed at once."""
        if _is_stranger(transport):
            self._count("stranger")
            return None
        if len(self.live) >= self.max_connections and not self._evict_one():
            self._count("refused")
            return None
        conn = _Connection(transport)
        self.live.add(conn)
        self._arm(conn)
        return conn

    def release(self, conn: _Connection) -> None:
        """The connection is gone (closed by either side)."""
        if conn.timer is not None:
            conn.timer.cancel()
        self.live.discard(conn)

    def sending(self, conn: _Connection) -> None:
        """Bytes came on the connection: a request is on its way."""
        conn.sent = True

    def _evict_one(self) -> bool:
        """Close the connection quiet longest (it has sent nothing since it opened or since its
        last answer); False when every one is sending or in the app. The newest are the last
        to go: a client that has just connected is about to send."""
        quiet = [(c.idle_since, id(c), c) for c in self.live if not c.busy and not c.sent]
        for *_, conn in sorted(quiet):
            if _unread_bytes(conn.transport):
                continue  # its request is on its way, not yet read: sending, not quiet
            self.release(conn)
            conn.transport.close()
            self._count("evicted")
            return True
        return False

    def _arm(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        conn.timer = loop.call_later(self.request_deadline_s, self._expire, conn)

    def _expire(self, conn: _Connection) -> None:
        if conn.busy or conn not in self.live:
            return
        self.release(conn)
        conn.transport.close()
        # A kept-alive connection that asked and was answered, then went quiet, is a client's
        # ordinary idle socket (uvicorn closed it just the same): counted, not warned of.
        self._count("timed_out" if conn.sent or not conn.served else "idle")

    def unread(self, conn: _Connection) -> None:
        """The connection's answers have sat unread past the deadline: abort it (a close
        would wait for a buffer that never drains)."""
        if conn in self.live:
            self.release(conn)
            conn.transport.abort()
            self._count("unread")

    def _count(self, reason: str) -> None:
        self.shed[reason] += 1
        if reason in QUIET_REASONS:
            return
        now = time.monotonic()
        if now - self._logged_at < SHED_LOG_INTERVAL_S:
            return
        since = {k: self.shed[k] - self._logged_shed[k] for k in self.shed}
        log.warning(
            "loopback_server.connections_shed",
            **since,
            live=len(self.live),
            max_connections=self.max_connections,
            note="connections that sent no complete request in time, or came at the cap;"
            f" counted, said at most every {SHED_LOG_INTERVAL_S:g} s",
        )
        self._logged_shed = dict(self.shed)
        self._logged_at = now

    # -- the ASGI side -----------------------------------------------------------------------

    def complete(self, conn: _Connection) -> None:
        """The connection's request is complete (the app has all of it): no deadline while the
        app works on it."""
        conn.busy = True
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def answered(self, conn: _Connection) -> None:
        """The app has answered on the connection: the next request's deadline starts now."""
        conn.busy = False
        conn.served += 1
        conn.idle_since = time.monotonic()
        if conn.timer is not None:  # answered before its request was complete (a 413)
            conn.timer.cancel()
        conn.sent = False
        if conn in self.live:
            self._arm(conn)
        conn.ready()

    def protocol_class(self) -> type[asyncio.Protocol]:
        """The protocol class to give `uvicorn.Config(http=...)`: uvicorn's own, behind this
        gate."""
        gate = self

        class Gated(_GatedProtocol):
            _gate = gate

        return Gated

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` telling the gate when each request is complete and answered, and adding the
        `Date` header per answer (the server no longer ticks once a second to refresh it)."""
        return _Marking(app, self)


class _GatedProtocol(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection, admitted and released by the gate, and given
    the connection's bytes only while it may take them (the module docstring, 3)."""

    _gate: ConnectionGate

    def __init__(self, **uvicorn_args: Any) -> None:
        self._inner: Any = H11Protocol(**uvicorn_args)
        self._conn: _Connection | None = None
        self._transport: asyncio.Transport | None = None
        self._held = bytearray()  # read, not yet handed to uvicorn
        self._reading = True
        self._inner_paused = False  # uvicorn asked for no more bytes for now
        self._write_paused = False  # answers are waiting in the transport's buffer
        self._feeding: asyncio.Handle | None = None
        self._unread: asyncio.TimerHandle | None = None  # the deadline for unread answers

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, asyncio's or uvloop's (which is not an `asyncio.Transport`).
        transport = cast(asyncio.Transport, transport)
        conn = self._gate.admit(transport)
        if conn is None:
            transport.close()
            return
        self._conn, self._transport = conn, transport
        conn.ready = self._ready_changed
        self._inner.connection_made(_InnerTransport(transport, self))

    def data_received(self, data: bytes) -> None:
        if self._conn is None:
            return
        self._gate.sending(self._conn)
        self._held += data
        self._feed()

    def _feed(self) -> None:
        """Hand uvicorn what is held when it may take it; read on while less than
        `HOLD_LIMIT_BYTES` is held (so a client that hangs up is still seen)."""
        conn, transport = self._conn, self._transport
        if conn is None or transport is None or transport.is_closing():
            return  # closing: uvicorn has said its last word on this connection
        if self._held and not (conn.busy or self._write_paused or self._inner_paused):
            data = bytes(self._held)
            self._held.clear()
            # The request task uvicorn may create now copies this context: its connection.
            _CONNECTION.set(conn)
            self._inner.data_received(data)
        self._set_reading(len(self._held) < HOLD_LIMIT_BYTES)

    def _ready_changed(self) -> None:
        """Something that held the bytes back may have cleared: feed on the loop's next turn,
        after the tasks uvicorn has just started (a pipelined request's) have begun."""
        if self._conn is None:
            return
        if self._held or self._inner_paused:
            self._gate.sending(self._conn)  # a next request is here already: not quiet
        if self._feeding is None:
            self._feeding = asyncio.get_running_loop().call_soon(self._fed)

    def _fed(self) -> None:
        self._feeding = None
        self._feed()

    def _set_reading(self, reading: bool) -> None:
        if reading == self._reading or self._transport is None:
            return
        self._reading = reading
        if reading:
            self._transport.resume_reading()
        else:
            self._transport.pause_reading()

    def inner_pause_reading(self, paused: bool) -> None:
        """uvicorn's protocol asks for bytes to stop (it holds a whole next request) or to
        come again."""
        self._inner_paused = paused
        if not paused:
            self._ready_changed()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._conn is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is None:
            return
        for pending in (self._feeding, self._unread):
            if pending is not None:
                pending.cancel()
        self._gate.release(self._conn)
        self._conn = None
        self._held.clear()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._inner.pause_writing()
        if self._conn is not None:
            loop = asyncio.get_running_loop()
            self._unread = loop.call_later(
                self._gate.request_deadline_s, self._gate.unread, self._conn
            )

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._unread is not None:
            self._unread.cancel()
            self._unread = None
        self._inner.resume_writing()
        self._ready_changed()


class _InnerTransport(asyncio.Transport):
    """The transport as uvicorn's protocol sees it: the real one, except that its pausing and
    resuming of reading are requests to the gated protocol, which alone decides when the socket
    is read (uvicorn resumes reading whenever an answer completes or its app awaits a message,
    however full the write buffer is)."""

    def __init__(self, transport: asyncio.Transport, gated: _GatedProtocol) -> None:
        super().__init__()
        self._transport = transport
        self._gated = gated
        self._paused = False

    def pause_reading(self) -> None:
        self._paused = True
        self._gated.inner_pause_reading(True)

    def resume_reading(self) -> None:
        self._paused = False
        self._gated.inner_pause_reading(False)

    def is_reading(self) -> bool:
        return not self._paused

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._transport.close()

    def abort(self) -> None:
        self._transport.abort()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def writelines(self, list_of_data: Iterable[bytes | bytearray | memoryview]) -> None:
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)


def _is_stranger(transport: asyncio.BaseTransport) -> bool:
    """A Unix socket's caller running as another user than this server (or one the kernel no
    longer names); never a TCP peer, which has no uid to ask."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.family != socket.AF_UNIX:
        return False
    try:
        return peer_uid(sock) != os.geteuid()
    except OSError:
        return True


def _unread_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes the peer has sent that the socket holds unread (the kernel's count)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        count = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0  # closed meanwhile: nothing on its way
    return int.from_bytes(count, sys.byteorder, signed=True)


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


class _Marking:
    """The ASGI half of the gate (`ConnectionGate.wrap`)."""

    def __init__(self, app: ASGIApp, gate: ConnectionGate) -> None:
        self.app = app
        self.gate = gate
        self._date = (0, b"")

    def _date_header(self) -> bytes:
        second = int(time.time())
        if self._date[0] != second:
            self._date = (second, formatdate(second, usegmt=True).encode())
        return self._date[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn = _CONNECTION.get()
        gate = self.gate
        if conn is not None and not _has_body(scope):
            gate.complete(conn)

        async def marking_receive() -> Message:
            message = await receive()
            if (
                conn is not None
                and message["type"] == "http.request"
                and not message.get("more_body", False)
            ):
                gate.complete(conn)
            return message

        async def marking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"date", self._date_header()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, marking_receive, marking_send)
        finally:
            if conn is not None:
                gate.answered(conn)
