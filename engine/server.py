"""`coop serve`: run the engine service (compat endpoint + notifier daemon) until SIGTERM.

Settings, read once at start (a wrong value stops the service naming the setting):

- `COOP_SERVICE_HOST`: the loopback address to listen on; default `127.0.0.1`.
- `COOP_SERVICE_PORT`: the port; default `8764` (`0` picks a free one; the `service.listening`
  event names the URL).
- the database: `COOP_DB` / `COOP_HOME` as for every `coop` command. The owner credential's
  path lives in the owner file (`coop cutover` writes both); the notifier's door key
  (`COOP_SERVICE_KEY_FILE`) is the notifier's own setting, read by `NotifierConfig`.

With an owner file the service is the ledger's owner; without one (local mode, before a cutover
or after its undo) it runs the notifier daemon and `/status`, and refuses compat calls with 409.

SIGTERM or SIGINT: stop accepting, let the compat call in flight finish, stop the daemon (it
finishes the row in flight), close the owner connection, exit 0.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import structlog
import uvicorn

from engine import store
from engine.errors import UsageError
from engine.metrics import mount_metrics
from engine.service import LOOPBACK_PEERS, Owner, create_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8764
LISTEN_BACKLOG = 128
SHUTDOWN_TIMEOUT_S = 10

log = structlog.get_logger("engine.server")


class ServiceConfig(NamedTuple):
    host: str
    port: int
    db_path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceConfig:
        env = os.environ if environ is None else environ
        host = env.get("COOP_SERVICE_HOST") or DEFAULT_HOST
        if host not in LOOPBACK_PEERS:
            raise UsageError(f"COOP_SERVICE_HOST must be a loopback address, not {host!r}")
        raw_port = env.get("COOP_SERVICE_PORT") or str(DEFAULT_PORT)
        try:
            port = int(raw_port)
        except ValueError:
            port = -1
        if not 0 <= port <= 65535:
            raise UsageError(f"COOP_SERVICE_PORT must be a port number, not {raw_port!r}")
        return cls(host=host, port=port, db_path=store.resolve(None).resolve())


def configure_logging() -> None:
    """One structlog event per line on stderr: JSON unless stderr is a terminal."""
    from notifier.logs import configure_logging as configure

    configure()


def build_daemon(service: Owner) -> Any | None:
    """The notifier daemon on the owner's connections, or None if the notifier is absent."""
    try:
        from notifier.config import NotifierConfig
        from notifier.daemon import Daemon
    except ImportError as exc:
        log.error("service.notifier_missing", error=str(exc))
        return None
    return Daemon(NotifierConfig.from_env(), connect=service.connect)


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: `serve()` owns SIGTERM, so the daemon stops
    after the last request and the process exits 0 (uvicorn would re-raise the signal)."""

    def capture_signals(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(LISTEN_BACKLOG)
    sock.set_inheritable(True)
    return sock


async def serve(config: ServiceConfig) -> None:
    service = Owner(config.db_path)
    service.connect().close()  # open once: migrate now, fail at start rather than at a call
    daemon = build_daemon(service)
    app = create_app(service, kick=daemon.kick if daemon is not None else None)
    mount_metrics(app, config.db_path)  # GET /metrics (engine.metrics)
    server = _Server(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT_S,
        )
    )
    sock = _bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    log.info("service.listening", url=url, database=str(config.db_path), pid=os.getpid())

    watcher = anyio.CancelScope()

    async def watch_signals() -> None:
        with watcher, anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("service.stopping", signal=signal.Signals(signum).name)
                server.should_exit = True
                return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_signals)
            if daemon is not None:
                app.state.daemon_running = True
                tg.start_soon(daemon.run)
            await server.serve(sockets=[sock])
            watcher.cancel()
            # The last compat call has answered: now the daemon finishes its row and returns.
            if daemon is not None:
                daemon.stop()
    finally:
        sock.close()
        service.close()
    log.info("service.stopped")


def main() -> int:
    """Run until SIGTERM; a wrong setting stops the service at start, naming the setting."""
    from notifier.daemon import backend_options
    from notifier.errors import NotifierError

    configure_logging()
    try:
        config = ServiceConfig.from_env()
        anyio.run(serve, config, backend_options=backend_options())
    except (UsageError, NotifierError) as exc:
        log.error("service.refused_to_start", error=exc.message)
        print(f"coop serve: {exc.message}", file=sys.stderr)
        return exc.exit_status
    return 0
