"""How many connections a loopback server holds, and how long one may take to ask.

uvicorn bounds neither well enough for a service a stray local client can reach: its
`limit_concurrency` counts idle connections, so a few hundred sockets that never send a request
make every real request a 503, and its only timer (`timeout_keep_alive`) runs between requests,
never before the first. The gate sits in front of uvicorn's own HTTP protocol through public
hooks only (a protocol class for `uvicorn.Config(http=...)`, and an ASGI wrapper) and keeps, per
server:

1. A request deadline. A connection must send a complete request (its headers, and its body
   when it has one) within `request_deadline_s` of opening, or of its last response; else it is
   closed. A request is complete once the app has its whole body, or has answered.
2. A cap. At most `max_connections` live at once. A new connection at the cap takes the place of
   an idle one, closed at once: the oldest that has never completed a request, else the one
   idle longest between requests (a keep-alive client opens a new connection when it finds its
   old one closed). Only when every connection has a request in the app is the new one closed
   instead. So idle and slow clients cannot take the last place from a real one, and the
   process keeps file descriptors to spare.

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
import os
import socket
import time
from email.utils import formatdate
from typing import Any

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from plumbing.unix import peer_uid

log = structlog.get_logger("loopback_server")

#: Live connections per server. Each is a file descriptor and at most one request in the app.
MAX_CONNECTIONS = 200
#: A complete request within this long of the connection opening or its last answer; the same
#: as uvicorn's keep-alive timeout, so a client's idle keep-alive connection lives as long as
#: it did.
REQUEST_DEADLINE_S = 5.0
SHED_LOG_INTERVAL_S = 60.0


class _Connection:
    """One live connection as the gate sees it."""

    __slots__ = ("busy", "idle_since", "served", "timer", "transport")

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.idle_since = time.monotonic()  # opened, or last answered
        self.busy = False  # a complete request is in the app
        self.served = 0  # requests answered on it
        self.timer: asyncio.TimerHandle | None = None


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
        #: What the gate shed, by reason: "evicted", "refused" (all busy), "timed_out",
        #: "stranger" (a Unix socket's caller running as another user).
        self.shed = {"evicted": 0, "refused": 0, "timed_out": 0, "stranger": 0}
        self._logged_shed = dict(self.shed)
        self._logged_at = -SHED_LOG_INTERVAL_S

    # -- the transport side ------------------------------------------------------------------

    def admit(self, transport: asyncio.BaseTransport) -> _Connection | None:
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

    def _evict_one(self) -> bool:
        idle = [(c.served > 0, c.idle_since, id(c), c) for c in self.live if not c.busy]
        if not idle:
            return False
        conn = min(idle)[3]  # never asked before answered; the longest idle first
        self.release(conn)
        conn.transport.close()
        self._count("evicted")
        return True

    def _arm(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        conn.timer = loop.call_later(self.request_deadline_s, self._expire, conn)

    def _expire(self, conn: _Connection) -> None:
        if conn.busy or conn not in self.live:
            return
        self.release(conn)
        conn.transport.close()
        self._count("timed_out")

    def _count(self, reason: str) -> None:
        self.shed[reason] += 1
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
        if conn in self.live:
            self._arm(conn)

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
    """uvicorn's HTTP protocol for one connection, admitted and released by the gate."""

    _gate: ConnectionGate

    def __init__(self, **uvicorn_args: Any) -> None:
        self._inner: Any = AutoHTTPProtocol(**uvicorn_args)
        self._conn: _Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        conn = self._gate.admit(transport)
        if conn is None:
            transport.close()
            return
        self._conn = conn
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._conn is not None:
            # The request task uvicorn may create now copies this context: its connection.
            _CONNECTION.set(self._conn)
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._conn is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is None:
            return
        self._gate.release(self._conn)
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._conn is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._conn is not None:
            self._inner.resume_writing()


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
