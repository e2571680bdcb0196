"""The engine service's process (`coop serve`), in notifier/ as it embeds the notifier's daemon.

It runs the engine service (the owner's compat endpoint and the notifier daemon, in one process;
also `coop-notifier serve`) until SIGTERM. The engine never imports the notifier (the
`engine-below-notifier` import contract holds it to that), so the one process that needs both
is assembled on the notifier's side, named for what it serves.
`coop serve` replaces itself with `python -m notifier serve` (same pid, same environment), so
operators, the Procfile and the systemd unit keep calling it `coop serve`.

Settings, read once at start (a wrong value stops the service naming the setting):

- `COOP_SERVICE_SOCKET`: the Unix socket the whole app listens on; default
  `<COOP_HOME>/service.sock`. It is bound 0600 in a folder of this user's that nobody else can
  write (`plumbing.unix.bind_private`), so no other user can stand in for the service while it
  is down; a socket left by a dead service is replaced, a live one refused. It is removed when
  the service stops.
- `COOP_METRICS_PORT`: the TCP port of Prometheus's `GET /metrics` alone, on 127.0.0.1 (no other
  route, no key: `engine.metrics.create_metrics_app`); default `8764`, `0` any free port, `off`
  none. The `service.listening` event names the socket and the metrics URL.
- `COOP_SERVICE_URL`, `COOP_SERVICE_PORT`, `COOP_SERVICE_HOST` (the TCP era's) are refused in
  one line naming what to set instead.
- the database: `COOP_DB` / `COOP_HOME` as for every `coop` command. The owner credential's
  path lives in the owner file (`coop cutover` writes both); the notifier's door key
  (`COOP_SERVICE_KEY_FILE`) is the notifier's own setting, read by `NotifierConfig`.

With an owner file the service is the ledger's owner; without one (local mode, before a cutover
or after its undo) it runs the notifier daemon and `/status`, and refuses compat calls with 409.

SIGTERM or SIGINT: stop accepting, let the compat call in flight finish, stop the daemon (it
finishes the row in flight), close the owner connection, exit 0. Further stop signals while
stopping are noted in the log and change nothing: the service still finishes and exits 0.

One service per ledger: `coop serve` holds an exclusive `flock` on `<coop.db>.serve.lock` for
its whole life (`claim_ledger`), taken before it listens, so a second `coop serve` on the same
coop.db refuses in one line naming the first one's pid and answers nothing.

The notifier daemon is one supervised part (`DaemonPart`). Beside a standalone daemon
(`coop-notifier run`) it logs once that the service serves the owner endpoint and leaves
delivery to that daemon (`service.delivery_left_to_daemon`), tries the daemon's lock again every
`TAKEOVER_RETRY_S`, and takes delivery over when that daemon stops
(`service.delivery_taken_over`). If it fails otherwise, `service.daemon_failed` says why;
`/status` shows `daemon: false` whenever this process's daemon does not deliver, and the owner
endpoint goes on answering. An error at start (a wrong setting, the socket or the metrics
port taken, the database unusable, the ledger served already) stops the service with one line
on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import structlog

from engine import kick, service_socket, store
from engine.daemon_lock import serve_lock_file
from engine.errors import CoopError, ServiceError, UsageError
from engine.metrics import create_metrics_app
from engine.owner.app import Owner, create_app
from notifier import metrics
from notifier.config import NotifierConfig, whole_number
from notifier.daemon import Daemon, InstanceLock, backend_options
from notifier.errors import DaemonAlreadyRunning, NotifierError
from notifier.pidlock import PidLock
from plumbing import holders, listening
from plumbing.http.server import QuietServer, loopback_config
from plumbing.logs import configure_logging
from plumbing.service import SOCKET_SETTING
from plumbing.terminal import shown

METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 8764
METRICS_OFF = "off"
SHUTDOWN_TIMEOUT_S = 10
# Beside a standalone daemon: how often the service tries that daemon's lock again (one
# non-blocking flock, no database read), so it takes delivery over about this soon after.
TAKEOVER_RETRY_S = 1.0

# The logger keeps the name it had in the engine: operators' log queries look for it.
log = structlog.get_logger("engine.server")


class ServiceConfig(NamedTuple):
    socket_path: str
    #: None: no TCP listener at all (`COOP_METRICS_PORT=off`).
    metrics_port: int | None
    db_path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceConfig:
        env = os.environ if environ is None else environ
        service_socket.refuse_tcp_settings(env)
        raw_port = env.get("COOP_METRICS_PORT", "").strip() or str(DEFAULT_METRICS_PORT)
        # ASCII digits only: `int` also reads other scripts' digits and `8_764`.
        digits = raw_port.isascii() and raw_port.isdigit()
        port = whole_number(raw_port, 0, 65535) if digits else None
        if port is None and raw_port != METRICS_OFF:
            raise UsageError(
                f"COOP_METRICS_PORT must be a port number or {METRICS_OFF!r}, not {raw_port!r}"
            )
        return cls(
            socket_path=service_socket.socket_path(env),
            metrics_port=port,
            db_path=store.resolve(None).resolve(),
        )


def build_daemon(service: Owner) -> Daemon:
    """The notifier daemon on the owner's connections (fence function registered), with
    `synchronous=NORMAL` as the standalone daemon's own: a lost delivery mark only re-posts a
    row the door deduplicates, and FULL cost one fdatasync per row."""
    return Daemon(NotifierConfig.from_env(), connect=lambda: service.connect(synchronous="NORMAL"))


class _Server(QuietServer):
    """The shared loopback server (`plumbing.http`) without uvicorn's signal handling:
    `StopSignals` owns SIGTERM and SIGINT, so the daemon stops after the last request and the
    process exits 0 (uvicorn would re-raise the signal, and restore the default action that a
    second signal then dies of)."""

    def capture_signals(self) -> Any:
        from contextlib import nullcontext

        return nullcontext()


class StopSignals:
    """SIGTERM and SIGINT for the whole life of the process: the first one asks the service to
    stop gracefully; every later one is only noted (honcho and systemd may send more than one
    while the service finishes its in-flight work, and none of them may kill it).

    Plain `signal.signal` handlers, installed before the event loop starts and never removed:
    a handler that an event loop installs is removed with it, and a signal arriving after that
    would kill the process by its default action. The handler only records the signal, asks the
    server to stop (`QuietServer.request_stop`, which wakes its loop) and wakes `watch`, which
    writes the log lines from the loop (writing to stderr inside a signal handler could re-enter
    a write in progress). Nothing polls: at rest the process sleeps.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: list[int] = []
        self._logged = 0
        self._servers: list[QuietServer] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._arrived: anyio.Event | None = None

    def install(self) -> None:
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def attach(self, server: QuietServer) -> None:
        """Stop `server` on the first signal (every server attached: the socket's and the
        metrics' listener)."""
        self._servers.append(server)
        if self.received:
            server.request_stop()

    def _handle(self, signum: int, frame: object) -> None:
        self.received.append(signum)
        for server in self._servers:
            server.request_stop()
        loop, arrived = self._loop, self._arrived
        if loop is not None and arrived is not None:
            # A loop that has closed no longer watches: `log_pending` runs once more at the end.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(arrived.set)

    def log_pending(self) -> None:
        for signum in self.received[self._logged :]:
            name = signal.Signals(signum).name
            if self._logged == 0:
                log.info("service.stopping", signal=name)
            else:
                log.info("service.stop_signal_noted", signal=name, note="already stopping")
            self._logged += 1

    async def watch(self) -> None:
        self._loop = asyncio.get_running_loop()
        try:
            while True:
                self._arrived = anyio.Event()
                self.log_pending()  # after the new event: a signal from now on sets it
                await self._arrived.wait()
        finally:
            self._loop = None


def _bind_socket(path: str) -> socket.socket:
    """The service's Unix socket (`plumbing.listening.bind_socket`), or one line saying why not."""
    try:
        sock = listening.bind_socket(path, SOCKET_SETTING)
    except listening.CannotListen as exc:
        raise ServiceError(exc.message) from exc
    sock.set_inheritable(True)
    return sock


def _bind_metrics(port: int) -> socket.socket:
    """`/metrics`' TCP socket, or one line saying why not."""
    advice = f"set COOP_METRICS_PORT to a free port, 0 for any, or {METRICS_OFF}"
    try:
        sock = listening.bind_tcp(METRICS_HOST, port, "COOP_METRICS_PORT", advice)
    except listening.CannotListen as exc:
        raise ServiceError(exc.message) from exc
    sock.set_inheritable(True)
    return sock


def _socket_identity(path: str) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


def _remove_socket(path: str, identity: tuple[int, int]) -> None:
    """Remove the socket file this process bound, if the path still names that one."""
    with contextlib.suppress(OSError):
        if _socket_identity(path) == identity:
            os.unlink(path)


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


def claim_ledger(db_path: Path) -> PidLock:
    """The one owner service per ledger: an exclusive `flock` on `<coop.db>.serve.lock` for the
    life of the process (the kernel drops it however the process ends). A second `coop serve`
    on the same coop.db is refused here, naming the first one's pid, before it listens."""
    lock = PidLock(serve_lock_path(db_path), "the service's lock file")
    if not lock.try_acquire():
        pid = lock.holder()
        raise ServiceError(
            f"another coop serve (pid {pid}) already serves {db_path} (it holds"
            f" {lock.path}): {holders.advice(pid)}, or point COOP_DB elsewhere"
        )
    return lock


def serve_lock_path(db_path: Path) -> Path:
    return Path(serve_lock_file(db_path))


async def serve(config: ServiceConfig, signals: StopSignals | None = None) -> None:
    signals = signals or StopSignals()
    service = Owner(config.db_path)
    service.connect().close()  # open once: migrate now, fail at start rather than at a call
    claim = claim_ledger(config.db_path)  # before the socket: a second one answers nothing
    try:
        await _serve_claimed(config, signals, service)
    finally:
        claim.release()


async def _serve_claimed(config: ServiceConfig, signals: StopSignals, service: Owner) -> None:
    part = DaemonPart(build_daemon(service), config.db_path)
    app = create_app(service, kick=part.kick)
    app.state.daemon_running = part.running
    part.on_running = lambda running: setattr(app.state, "daemon_running", running)
    part.on_left_to = lambda pid: setattr(app.state, "daemon_lock_holder", pid)
    servers = [_server(app)]
    sock = _bind_socket(config.socket_path)
    identity = _socket_identity(config.socket_path)
    sockets = [sock]
    metrics_url = None
    try:
        if config.metrics_port is not None:
            # GET /metrics alone on TCP (engine.metrics), the embedded worker's counters beside
            # the ledger's; its own gate, so a scraper never takes a place from a real client.
            metrics_sock = _bind_metrics(config.metrics_port)
            sockets.append(metrics_sock)
            metrics_app = create_metrics_app(
                config.db_path, extra=[metrics.enable()], refusals=app.state.refusals
            )
            servers.append(_server(metrics_app))
            metrics_url = f"http://{METRICS_HOST}:{metrics_sock.getsockname()[1]}"
        log.info(
            "service.listening",
            socket=config.socket_path,
            metrics_url=metrics_url,
            database=str(config.db_path),
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
        _remove_socket(config.socket_path, identity)
        for each in sockets:
            each.close()
        service.close()
        signals.log_pending()
        app.state.refusals.say_pending()  # what the last minute had not said yet
    log.info("service.stopped")


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


def main() -> int:
    """Run until SIGTERM or SIGINT (however many arrive: exit 0 once the work in flight is
    done); an error the design names (a wrong setting, a port in use, an unusable database)
    stops the service at start with one line naming it."""
    configure_logging()
    signals = StopSignals()
    signals.install()
    try:
        config = ServiceConfig.from_env()
        anyio.run(serve, config, signals, backend_options=backend_options())
    except (CoopError, NotifierError) as exc:
        return _refused(exc.message, exc.exit_status)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _refused(f"{exc.strerror or exc}{where}", 1)
    return 0


def _refused(message: str, status: int) -> int:
    """One line, the same shape as every service's (`plumbing.listening`): not a log event
    beside it as well, which would say it twice."""
    print(shown(f"coop serve: {message}"), file=sys.stderr)
    return status
