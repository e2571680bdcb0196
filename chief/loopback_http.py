"""Serving HTTP on loopback: the bind-address check and the uvicorn runner that the project's
own long-running entry points share.

`chief serve` (the door, `chief.serve`) and `chief telegram-emulator` (`chief.telegram`) both
use it, so it sits beside them rather than inside either: `chief.telegram` imports nothing from
`chief.door` (an import contract holds that).

- `is_loopback_host`: the names a loopback bind may use (the emulator's `--host`), and the Bot
  API hosts the Telegram sender reaches without an environment proxy (`telegram.sender`). The
  door's guard checks each request's peer and `Host` header separately (`chief.door.guard`).
- `run_server`: one app on a loopback bind, or `run_servers`: several apps in one process, each
  on sockets the caller bound (the door: its app on its Unix socket, `/metrics` alone on TCP),
  stopped together (a stop signal, or one of them ending, stops them all); each on the
  project's shared server (`plumbing.http`: connections
  capped and given a deadline to ask, a stop that is an event, no access log: every event the
  project cares about is its own structlog line), SIGTERM/SIGINT handled by uvicorn (finish the
  requests in flight within a bound, then return so `main` exits 0; any number of further stop
  signals change nothing), a start failure the app logged as one event printed without a
  traceback, and one
  `<name>.listening` event carrying the bound port (with port 0 the operating system picks it;
  tests read it there), or the socket's path for a Unix socket.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType

import anyio
import structlog
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chief.errors import ChiefError
from plumbing.http.server import QuietServer, loopback_config

log = structlog.get_logger("chief.loopback_http")

# In-flight requests get this long to finish after SIGTERM before uvicorn closes them.
GRACEFUL_SHUTDOWN_S = 5.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def is_loopback_host(host: str) -> bool:
    """True for the names a loopback bind may use: `localhost` or a loopback address."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Listener:
    """One app of `run_servers`, on `sockets` the caller bound (`host`/`port` when None)."""

    app: ASGIApp
    event: str
    sockets: Sequence[socket.socket] | None = None
    host: str = "127.0.0.1"
    port: int = 0
    lifespan: str = "on"


class _ListeningServer(QuietServer):
    def __init__(self, config: uvicorn.Config, event: str) -> None:
        super().__init__(config)
        self._event = event
        #: the servers of one process that stop together (this one among them)
        self.group: list[_ListeningServer] = [self]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Every stop signal, the first or the fifth, SIGTERM or SIGINT, means the same thing:
        # stop gracefully. uvicorn's own handler forces the exit on a second SIGINT (dropping the
        # requests in flight) and re-raises the signals once it returns, so the process died by
        # the signal honcho forwards after Ctrl-C's SIGINT.
        for server in self.group:
            server.request_stop()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            for server in self.servers:
                for sock in server.sockets:
                    name = sock.getsockname()
                    if isinstance(name, str):
                        log.info(self._event, socket=name)
                    else:
                        log.info(self._event, host=name[0], port=name[1])


#: What uvicorn logs (on `uvicorn.error`) after any failed lifespan start.
_UVICORN_START_FAILED = "Application startup failed. Exiting."


class _HeldBack(logging.Filter):
    """uvicorn's "Application startup failed" line, dropped when the failure was one the app
    already holds for its caller's one line (`_QuietStartFailure`)."""

    def __init__(self, wrappers: Sequence[_QuietStartFailure]) -> None:
        super().__init__()
        self.wrappers = wrappers

    def filter(self, record: logging.LogRecord) -> bool:
        held = any(wrapper.held_back for wrapper in self.wrappers)
        return not (held and record.getMessage() == _UVICORN_START_FAILED)


class _QuietStartFailure:
    """ASGI wrapper: a start failure the app already logged as one event (a `ChiefError` out of
    its lifespan) reaches uvicorn without Starlette's traceback text, which uvicorn would print.
    Any other exception keeps its traceback: that one is a bug."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        #: a start failure was held back: uvicorn's own "Application startup failed" is too
        #: (`_HeldBack`), the caller saying it in its one line
        self.held_back = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold_failures(message: Message) -> None:
            if message["type"] in {"lifespan.startup.failed", "lifespan.shutdown.failed"}:
                held.append(message)
                return
            await send(message)

        try:
            await self.app(scope, receive, hold_failures)
        except ChiefError:
            self.held_back = bool(held)
            for message in held:
                await send({**message, "message": ""})
            raise
        except BaseException:
            for message in held:
                await send(message)
            raise


def run_server(app: ASGIApp, *, host: str, port: int, event: str) -> bool:
    """Serve `app` until SIGTERM/SIGINT; return False when it could not start (port taken)."""
    return run_servers([Listener(app, event, host=host, port=port)])


def run_servers(listeners: Sequence[Listener]) -> bool:
    """Serve every listener's app until SIGTERM/SIGINT, or until one of them stops (a failed
    start included); return False when any could not start."""
    wrappers = [_QuietStartFailure(listener.app) for listener in listeners]
    servers = [
        _ListeningServer(
            loopback_config(
                wrapper,
                host=listener.host,
                port=listener.port,
                lifespan=listener.lifespan,
                timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
            ),
            listener.event,
        )
        for listener, wrapper in zip(listeners, wrappers, strict=True)
    ]
    for server in servers:
        server.group = servers
    held_back = _HeldBack(wrappers)
    logging.getLogger("uvicorn.error").addFilter(held_back)
    # Installed before uvicorn and left in place after it: uvicorn restores the handlers it
    # found when it returns, and a stop signal in the last moments of the process (closing the
    # Chief, releasing the lock) must not kill it by the default action either.
    for sig in STOP_SIGNALS:
        signal.signal(sig, servers[0].handle_exit)
    try:
        asyncio.run(_serve_all(servers, listeners))
    except SystemExit as exc:
        # uvicorn exits the process when it cannot bind; let the caller say what to do instead.
        return not exc.code
    finally:
        # The service has stopped and the process is on its way out. Python's finalisation puts
        # back the default action of every signal with a Python handler (killing the process
        # by the signal), but leaves an ignored one ignored.
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        logging.getLogger("uvicorn.error").removeFilter(held_back)
    return all(server.started for server in servers)


async def _serve_all(servers: list[_ListeningServer], listeners: Sequence[Listener]) -> None:
    async def serve(server: _ListeningServer, listener: Listener) -> None:
        try:
            sockets = None if listener.sockets is None else list(listener.sockets)
            await server.serve(sockets=sockets)
        finally:
            # One server done (stopped, or failed to start): the process stops serving.
            for other in servers:
                other.request_stop()

    # The first failure is the one raised (as one error, never a group): each listener's own is
    # kept, and the others stop because it did.
    failures: list[BaseException] = []

    async def serve_keeping(server: _ListeningServer, listener: Listener) -> None:
        try:
            await serve(server, listener)
        except (Exception, SystemExit) as exc:  # uvicorn exits when it cannot bind or start
            failures.append(exc)

    async with anyio.create_task_group() as group:
        for server, listener in zip(servers, listeners, strict=True):
            group.start_soon(serve_keeping, server, listener)
    if failures:
        raise failures[0]
