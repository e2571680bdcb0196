"""What `coop serve` runs once nothing refused its start (`notifier.engine_service`): the
owner's app and `/metrics` on the sockets the start bound, the embedded notifier daemon as one
supervised part (`DaemonPart`), and the servers until a stop signal. FastAPI, uvicorn and the
daemon's modules load here, about 0.3 s of CPU, which a refused start never pays."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio
import structlog

from engine import kick
from engine.errors import CoopError
from engine.metrics import create_metrics_app
from engine.owner.app import Owner, create_app
from notifier import metrics
from notifier.config import NotifierConfig
from notifier.daemon import Daemon, InstanceLock
from notifier.errors import DaemonAlreadyRunning, NotifierError
from plumbing.http.server import QuietServer, loopback_config

# The logger keeps the name it had in the engine: operators' log queries look for it.
log = structlog.get_logger("engine.server")

SHUTDOWN_TIMEOUT_S = 10
# Beside a standalone daemon: how often the service tries that daemon's lock again (one
# non-blocking flock, no database read), so it takes delivery over about this soon after.
TAKEOVER_RETRY_S = 1.0


class Signals(Protocol):
    """The start's stop signals (`notifier.engine_service.StopSignals`), as the servers see them."""

    def attach(self, server: QuietServer) -> None: ...

    async def watch(self) -> None: ...

    def log_pending(self) -> None: ...


def build_daemon(service: Owner, config: NotifierConfig | None = None) -> Daemon:
    """The notifier daemon on the owner's connections (fence function registered), with
    `synchronous=NORMAL` as the standalone daemon's own: a lost delivery mark only re-posts a
    row the door deduplicates, and FULL cost one fdatasync per row."""
    config = NotifierConfig.from_env() if config is None else config
    return Daemon(config, connect=lambda: service.connect(synchronous="NORMAL"))


class _Server(QuietServer):
    """The shared loopback server (`plumbing.http`) without uvicorn's signal handling:
    `StopSignals` owns SIGTERM and SIGINT, so the daemon stops after the last request and the
    process exits 0 (uvicorn would re-raise the signal, and restore the default action that a
    second signal then dies of)."""

    def capture_signals(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()


class DaemonPart:
    """The embedded notifier daemon as one supervised part of the service.

    Beside a standalone daemon (`coop-notifier run` holds the store's daemon lock) the service
    says once that it serves the owner endpoint and leaves delivery to that daemon, then tries
    the lock again every `retry_s` (one non-blocking `flock`, no database read): when that
    daemon stops (after a cutover it steps aside at its next drain: the fence refuses it),
    this one takes delivery over within about a second. Any other failure is
    logged (`service.daemon_failed`) and the owner endpoint goes on answering. Kicks go to
    this daemon while it delivers, else to whichever daemon listens on the store's socket."""

    def __init__(
        self, daemon: Daemon | None, db_path: Path, retry_s: float = TAKEOVER_RETRY_S
    ) -> None:
        self.daemon = daemon
        self.db_path = db_path
        self.retry_s = retry_s
        self.running = False  # this process's daemon claimed the store and delivers
        self.done = anyio.Event()
        self._left_to: str | None = None  # the standalone daemon's pid while it delivers
        self._stop_asked = anyio.Event()
        #: Called with `running` whenever it changes (the app's `/status`).
        self.on_running: Callable[[bool], None] = lambda running: None
        #: Called with the pid of the daemon delivery is left to, and None once this one
        #: delivers (the app's `/status`: `coop status --check` names it).
        self.on_left_to: Callable[[int | str | None], None] = lambda pid: None
        if daemon is not None:
            daemon.on_started = self._started

    def kick(self) -> None:
        if self.running and self.daemon is not None:
            self.daemon.kick()
        else:
            kick.send_datagram(self.db_path)

    def _started(self) -> None:
        if self._left_to is not None:
            log.info("service.delivery_taken_over", stopped_daemon_pid=_pid(self._left_to))
            self._left_to = None
            self.on_left_to(None)
        self._set_running(True)

    def _set_running(self, running: bool) -> None:
        self.running = running
        self.on_running(running)

    async def run(self) -> None:
        try:
            await self._deliver_when_free()
        except (NotifierError, CoopError) as exc:
            log.error("service.daemon_failed", error=exc.message, owner_endpoint="answering")
        except Exception as exc:  # one failed part must not take down the owner endpoint
            log.error("service.daemon_failed", error=str(exc), exc_info=exc)
        finally:
            self._set_running(False)
            self.done.set()

    async def _deliver_when_free(self) -> None:
        daemon = self.daemon
        while daemon is not None and not self._stop_asked.is_set():
            try:
                await daemon.run()
                return
            except DaemonAlreadyRunning:
                holder = InstanceLock(self.db_path).holder()
                if self._left_to is None:
                    log.info(
                        "service.delivery_left_to_daemon",
                        daemon_pid=_pid(holder),
                        note="serving the owner endpoint and leaving delivery to the notifier"
                        " daemon already running for this ledger; taking delivery over when"
                        f" that daemon stops (its lock is tried every {self.retry_s:g} s)",
                    )
                self._left_to = holder
                self.on_left_to(_pid(holder))
            with anyio.move_on_after(self.retry_s):
                await self._stop_asked.wait()

    def stop(self) -> None:
        self._stop_asked.set()
        if self.daemon is not None:
            self.daemon.stop()


def _pid(holder: str) -> int | str:
    return int(holder) if holder.isdigit() else holder


async def serve_bound(
    db_path: Path,
    socket_path: str,
    notifier_config: NotifierConfig,
    signals: Signals,
    sockets: list[socket.socket],
) -> None:
    """Serve the owner's app on `sockets[0]` (the Unix socket) and `/metrics` on `sockets[1]`
    when there is one, with the daemon beside them, until a stop signal; the start keeps and
    closes the sockets."""
    service = Owner(db_path)
    part = DaemonPart(build_daemon(service, notifier_config), db_path)
    app = create_app(service, kick=part.kick)
    app.state.daemon_running = part.running
    part.on_running = lambda running: setattr(app.state, "daemon_running", running)
    part.on_left_to = lambda pid: setattr(app.state, "daemon_lock_holder", pid)
    servers = [_server(app)]
    metrics_url = None
    try:
        if len(sockets) > 1:
            # GET /metrics alone on TCP (engine.metrics), the embedded worker's counters beside
            # the ledger's; its own gate, so a scraper never takes a place from a real client.
            metrics_app = create_metrics_app(
                db_path, extra=[metrics.enable()], refusals=app.state.refusals
            )
            servers.append(_server(metrics_app))
            host, port = sockets[1].getsockname()[:2]
            metrics_url = f"http://{host}:{port}"
        log.info(
            "service.listening",
            socket=socket_path,
            metrics_url=metrics_url,
            database=str(db_path),
            pid=os.getpid(),
        )
        for server in servers:
            signals.attach(server)
        async with anyio.create_task_group() as tg:
            tg.start_soon(signals.watch)
            tg.start_soon(part.run)
            async with anyio.create_task_group() as serving:
                for server, listener in zip(servers, sockets, strict=True):
                    serving.start_soon(_serve_until_stopped, server, listener, servers)
            # The last compat call has answered: now the daemon finishes its row and returns.
            part.stop()
            await part.done.wait()
            tg.cancel_scope.cancel()
    finally:
        service.close()
        signals.log_pending()
        app.state.refusals.say_pending()  # what the last minute had not said yet


def _server(app: Any) -> _Server:
    return _Server(
        loopback_config(app, lifespan="off", timeout_graceful_shutdown=SHUTDOWN_TIMEOUT_S)
    )


async def _serve_until_stopped(
    server: _Server, listener: socket.socket, servers: list[_Server]
) -> None:
    """Serve on `listener` until stopped; then stop the others too (one stops, all stop)."""
    try:
        await server.serve(sockets=[listener])
    finally:
        for other in servers:
            other.request_stop()
