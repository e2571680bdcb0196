"""The protocol half of the connection gate: one connection's bytes, from the socket to
uvicorn's HTTP protocol, admitted by the gate and flow-controlled (`gate`, point 3).

A connection whose answers are unread is not read further. uvicorn is handed a connection's
bytes only while no complete request of it is in the app, its answers are not waiting in the
transport's write buffer (past the high-water mark), and uvicorn itself has not asked for a
pause (it holds a whole next request). Meanwhile the protocol reads on and holds up to
`HOLD_LIMIT_BYTES` (so a client that hangs up while the app works is still seen), then stops
reading the socket.

uvicorn's own protocols leave this open: they resume reading whenever an answer completes or
the app awaits a message, however full the write buffer (one pipelining client that never read
grew a service by a gigabyte in seconds). This runs uvicorn's h11 protocol, which parses one
request at a time and keeps the rest as bytes; its httptools protocol parses everything it is
handed and queues each request as objects. Only this moves the socket's reading: uvicorn's
protocol sees the transport through a wrapper whose pause and resume are requests to it.
Public interfaces only: an `asyncio.Protocol` given to `uvicorn.Config(http=...)`, and an
`asyncio.Transport` handed to uvicorn's protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol

from plumbing.http.gate import CONNECTION, Connection, ConnectionGate

#: Bytes a connection may send ahead of what uvicorn may take: read and held (a client that
#: hangs up while the app works is still seen), then the socket is not read until it may.
HOLD_LIMIT_BYTES = 64 * 1024


def protocol_class(gate: ConnectionGate) -> type[asyncio.Protocol]:
    """The protocol class to give `uvicorn.Config(http=...)`: uvicorn's own, behind `gate`."""

    class Gated(_GatedProtocol):
        _gate = gate

    return Gated


class _GatedProtocol(asyncio.Protocol):
    """uvicorn's HTTP protocol for one connection, admitted and released by the gate, and given
    the connection's bytes only while it may take them (the module docstring, 3)."""

    _gate: ConnectionGate

    def __init__(self, **uvicorn_args: Any) -> None:
        self._inner: Any = H11Protocol(**uvicorn_args)
        self._conn: Connection | None = None
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
            CONNECTION.set(conn)
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
