"""The engine service's process (`coop serve`), in notifier/ as it embeds the notifier's daemon.

It runs the engine service (the owner's compat endpoint and the notifier daemon, in one process;
also `coop-notifier serve`) until SIGTERM. The engine never imports the notifier (the
`engine-below-notifier` import contract holds it to that), so the one process that needs both
is assembled on the notifier's side, named for what it serves.
`coop serve` replaces itself with `python -m notifier serve` (same pid, same environment), so
operators, the Procfile and the systemd unit keep calling it `coop serve`.

This module is the start: the settings, the ledger opened once, the serve lock, the socket and
the metrics port, each of which may refuse the start in one line, before the service's libraries
load. `notifier.service_parts` then builds the owner's app, `/metrics` and the daemon on those
sockets and serves (FastAPI and uvicorn: about 0.3 s of CPU that a refused start never pays).

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
`TAKEOVER_RETRY_S` (`notifier.service_parts`), and takes delivery over when that daemon stops
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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import anyio
import structlog

from engine import owner, service_socket, store
from engine.daemon_lock import serve_lock_file
from engine.errors import CoopError, ServiceError, UsageError
from notifier.config import NotifierConfig, whole_number
from notifier.daemon import backend_options
from notifier.errors import NotifierError
from notifier.pidlock import PidLock
from plumbing import holders, listening
from plumbing.logs import configure_logging
from plumbing.service import SOCKET_SETTING
from plumbing.terminal import shown

if TYPE_CHECKING:
    from plumbing.http.server import QuietServer

METRICS_HOST = "127.0.0.1"
DEFAULT_METRICS_PORT = 8764
METRICS_OFF = "off"

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
    """Everything that may refuse the start (the ledger, the lock, the notifier's settings, the
    socket and the metrics port) before the service's libraries load; then serve until stopped."""
    signals = signals or StopSignals()
    open_ledger(config.db_path)  # migrate now, fail at start rather than at a call
    claim = claim_ledger(config.db_path)  # before the socket: a second one answers nothing
    try:
        notifier_config = NotifierConfig.from_env()
        sock = _bind_socket(config.socket_path)
        identity = _socket_identity(config.socket_path)
        sockets = [sock]
        try:
            if config.metrics_port is not None:
                sockets.append(_bind_metrics(config.metrics_port))
            from notifier.service_parts import serve_bound  # FastAPI and uvicorn, once it may run

            await serve_bound(config.db_path, config.socket_path, notifier_config, signals, sockets)
        finally:
            _remove_socket(config.socket_path, identity)
            for each in sockets:
                each.close()
    finally:
        claim.release()
    log.info("service.stopped")


def open_ledger(db_path: Path) -> None:
    """Open the ledger once as the owner service will (fence function registered), so an
    unusable or unmigratable database stops the start in one line."""
    owner.register_fence_function(
        store.open_connection(db_path, check_same_thread=False, synchronous="FULL")
    ).close()


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
