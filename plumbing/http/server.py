"""The uvicorn server every loopback service runs: on the connection gate (`gate`), and
stopped by an event rather than a poll.

uvicorn's own main loop wakes every 0.1 s to look at `should_exit` (and to refresh the `Date`
header once a second): ten wakeups a second in a process that has nothing to do. `QuietServer`
sleeps until `request_stop` (or uvicorn's `handle_exit`) wakes it; the gate's ASGI half writes
the `Date` header per answer instead.

`loopback_config` is the `uvicorn.Config` the services share: the gate's protocol and ASGI
halves, no proxy headers (the scope's `client` is the peer itself: the guards check it),
uvicorn's own concurrency limit off (the gate caps connections
instead, without counting idle ones against real requests), no access log and no websockets.
A service on a Unix socket binds it with `plumbing.unix.bind_private` and hands it to
`serve(sockets=[...])`: uvicorn's own `uds` option makes the socket 0666 (every local user may
connect), so `loopback_config` refuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import FrameType
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp

from plumbing.http.flow import protocol_class
from plumbing.http.gate import ConnectionGate

#: Connections the kernel queues for the server to accept (uvicorn's 2048 by default). A flood of
#: new connections faster than the server accepts them keeps the queue full, and a real client
#: waits behind all of it: behind 2048, a notifier's request went unanswered for its whole 10 s.
#: A shorter queue bounds that wait; a client meeting it full waits for a place.
BACKLOG = 128


class QuietServer(uvicorn.Server):
    """uvicorn's server, woken by a stop instead of polling for one."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: anyio.Event | None = None

    def request_stop(self) -> None:
        """Stop gracefully, as uvicorn does on `should_exit` (which is to be set through this
        only: nothing polls it now); safe in a signal handler (the event is set from the loop,
        which this wakes)."""
        self.should_exit = True
        self._wake()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """uvicorn's own signal handling (a second SIGINT forces the exit), then the wake."""
        super().handle_exit(sig, frame)
        self._wake()

    def _wake(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return  # not serving yet: the main loop sees `should_exit` when it starts
        # A loop that has closed has stopped serving already.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop.set)

    async def main_loop(self) -> None:
        self._stop = anyio.Event()
        self._loop = asyncio.get_running_loop()
        try:
            # One tick sets the server's default headers (the `Date` comes from the gate).
            await self.on_tick(0)
            while not self.should_exit:
                await self._stop.wait()
        finally:
            self._loop = None


def loopback_config(
    app: ASGIApp, gate: ConnectionGate | None = None, **options: Any
) -> uvicorn.Config:
    """`uvicorn.Config` for `app` behind `gate` (a new one by default); `options` add to or
    override the shared settings (the module docstring)."""
    if options.get("uds") is not None:
        # uvicorn's own Unix socket is made 0666, open to every local user.
        raise ValueError(
            "a loopback service's Unix socket is bound by plumbing.unix.bind_private (0600, in a "
            "private folder) and handed to serve(sockets=[...]), never uvicorn's uds option, "
            "which makes it 0666"
        )
    gate = gate or ConnectionGate()
    settings: dict[str, Any] = {
        "http": protocol_class(gate),
        "proxy_headers": False,
        "date_header": False,
        "limit_concurrency": None,
        "log_config": None,
        "access_log": False,
        "ws": "none",
        "backlog": BACKLOG,
    }
    return uvicorn.Config(gate.wrap(app), **(settings | options))
