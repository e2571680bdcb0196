"""How many connections a loopback server holds, how long one may take to ask, and how far it
is read ahead of its answers.

uvicorn bounds neither well enough for a service a stray local client can reach: its
`limit_concurrency` counts idle connections, so a few hundred sockets that never send a request
make every real request a 503, and its only timer (`timeout_keep_alive`) runs between requests,
never before the first. The gate sits in front of uvicorn's own HTTP protocol through public
hooks only (a protocol class for `uvicorn.Config(http=...)`, in `flow`, and an ASGI wrapper) and
keeps, per server:

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
3. Flow control. A connection whose answers are unread is not read further: the protocol half
   (`flow`) hands uvicorn a connection's bytes only while no complete request of it is in the
   app and its answers are not piling in the write buffer, and reads at most
   `flow.HOLD_LIMIT_BYTES` ahead.

On a Unix socket the kernel names the caller: a connection from any uid but the server's own is
closed at once (shed as "stranger"), before uvicorn sees a byte. The socket's mode already keeps
others out; this holds when the socket or its folder is opened to them by mistake.

The two halves meet by the connection itself, not by an address (a Unix socket's peer has none):
the protocol half sets `CONNECTION` (a context variable) to its connection before it hands
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
from collections.abc import Callable
from email.utils import formatdate

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class Connection:
    """One live connection as the gate sees it (the protocol half, `flow`, holds it)."""

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
CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
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
        self.live: set[Connection] = set()
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

    def admit(self, transport: asyncio.Transport) -> Connection | None:
        """A new connection: its record, or None when it is to be closed at once."""
        if _is_stranger(transport):
            self._count("stranger")
            return None
        if len(self.live) >= self.max_connections and not self._evict_one():
            self._count("refused")
            return None
        conn = Connection(transport)
        self.live.add(conn)
        self._arm(conn)
        return conn

    def release(self, conn: Connection) -> None:
        """The connection is gone (closed by either side)."""
        if conn.timer is not None:
            conn.timer.cancel()
        self.live.discard(conn)

    def sending(self, conn: Connection) -> None:
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

    def _arm(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        conn.timer = loop.call_later(self.request_deadline_s, self._expire, conn)

    def _expire(self, conn: Connection) -> None:
        if conn.busy or conn not in self.live:
            return
        self.release(conn)
        conn.transport.close()
        # A kept-alive connection that asked and was answered, then went quiet, is a client's
        # ordinary idle socket (uvicorn closed it just the same): counted, not warned of.
        self._count("timed_out" if conn.sent or not conn.served else "idle")

    def unread(self, conn: Connection) -> None:
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

    def complete(self, conn: Connection) -> None:
        """The connection's request is complete (the app has all of it): no deadline while the
        app works on it."""
        conn.busy = True
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def answered(self, conn: Connection) -> None:
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

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` telling the gate when each request is complete and answered, and adding the
        `Date` header per answer (the server no longer ticks once a second to refresh it)."""
        return _Marking(app, self)


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
        conn = CONNECTION.get()
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
