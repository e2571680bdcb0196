"""Running an ASGI app on uvicorn for the project's own long-running entry points.

`chief serve` and `chief telegram-emulator` share it: loopback bind, no access log (every event
the project cares about is its own structlog line), SIGTERM/SIGINT handled by uvicorn (finish the
requests in flight within a bound, then return so `main` exits 0), and one `<name>.listening`
event carrying the bound port (with port 0 the operating system picks it; tests read it there).
"""

from __future__ import annotations

import socket
from types import FrameType

import structlog
import uvicorn
from starlette.types import ASGIApp

# In-flight requests get this long to finish after SIGTERM before uvicorn closes them.
GRACEFUL_SHUTDOWN_S = 5.0
# Beyond this many concurrent connections uvicorn answers 503 at once: a bound on the waiters
# one misbehaving client can park in the door.
MAX_CONCURRENT_CONNECTIONS = 200


class _ListeningServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, event: str) -> None:
        super().__init__(config)
        self._event = event

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # SIGTERM is this service's normal way to stop: after the graceful shutdown `main`
        # returns 0, instead of uvicorn re-raising the signal and the process dying by it.
        self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            for server in self.servers:
                for sock in server.sockets:
                    host, port = sock.getsockname()[:2]
                    structlog.get_logger("chief.serving").info(self._event, host=host, port=port)


def run_server(app: ASGIApp, *, host: str, port: int, event: str) -> bool:
    """Serve `app` until SIGTERM/SIGINT; return False when it could not start (port taken)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="none",
        limit_concurrency=MAX_CONCURRENT_CONNECTIONS,
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
    )
    server = _ListeningServer(config, event)
    try:
        server.run()
    except SystemExit as exc:
        # uvicorn exits the process when it cannot bind; let the caller say what to do instead.
        return not exc.code
    return server.started
