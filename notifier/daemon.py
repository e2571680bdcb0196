"""The long-running notifier: apply the requests' deadlines that have come, drain, then sleep
until a kick, the head's due time, the earliest open deadline, or a backstop.

    daemon = Daemon(config)     # no I/O here
    await daemon.run()          # binds the kick socket, resumes pending rows, runs until stop()
    daemon.kick()               # in-process wake (from the event loop's thread)
    daemon.stop()               # finish the row in flight, release, then run() returns

One daemon per store: `run()` first takes an exclusive `flock` on `<db>.notifier.lock` (as the
door does for `chief serve`), so of two daemons started together exactly one runs and the other
raises `DaemonAlreadyRunning`; the kernel drops the lock however the holder dies. A refused
`run()` changes nothing, so it may be called again (`coop serve` beside a standalone daemon
retries until that daemon stops).

Start order closes the lost-kick window: the kick socket is bound *before* the first drain, so
a producer committing after the bind wakes the daemon with a datagram, and one committing
before it is seen by the first drain (which also resumes whatever a dead process left pending
or in flight: its lock is taken over once the holder is provably gone).

The lock is claimed per drain, not held while asleep: each drain ends with the atomic idle
handoff, so a one-shot drainer spawned while the socket was briefly unbound can win the lock
and drain, and the daemon never strands a row by sleeping on a lock. While a live worker holds
the lock the daemon re-tries with a growing interval (it drains every due row and hands off
atomically; the retry only catches a deferred head coming due afterwards).

Before each drain the daemon applies the deadlines that have come (`notifier.deadlines`: the
ledger closes a request with its default, or abandons it, in one transaction with its event
and its outbox row), so at a start the deadlines that passed meanwhile are applied at once.

A drain that fails (the store is full or unreadable, the lock was cleared under it by
`coop worker unlock`) is logged (`notifier.daemon.drain_failed`) and retried after a growing
pause (COOP_BACKOFF_BASE_S doubling up to COOP_BACKOFF_MAX_S; a kick or a stop ends the pause):
the daemon, and the `coop serve` it lives in, go on.

A standalone daemon (its own connections) that the cutover's fence refuses steps aside: when a
drain fails and the ledger carries the fence (`engine.store.fence_refuses`: only the owner
service's connections pass it), it logs one line (`notifier.daemon.stepped_aside`) and `run()`
returns, releasing the ledger's lock, so that `coop serve`'s daemon, which tries that lock every
second, takes delivery over and resumes what is pending. `coop cutover` refuses while such a
daemon holds the ledger (`engine.daemon_lock`); this covers one that took the lock after it.

Stop order: finish the row in flight, release the lock, close the socket; then, if a due row
is left, kick (`engine.kick.kick`, honouring `COOP_KICK`): a datagram to a successor daemon, or
a one-shot drainer, so no row waits for the next producer.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog
from anyio.abc import UNIXDatagramSocket

from engine import kick as engine_kick
from engine.daemon_lock import daemon_lock_file
from engine.errors import CoopError
from notifier import delivery
from notifier.config import NotifierConfig
from notifier.deadlines import Deadlines
from notifier.delivery import Database, open_own_connection
from notifier.errors import ConfigError, DaemonAlreadyRunning, NotifierError, StoreError
from notifier.pidlock import PidLock
from notifier.worker import DrainOutcome, Worker
from plumbing import files, holders, listening
from plumbing.faults import fault

if TYPE_CHECKING:
    from notifier.client import DoorClient

# The first re-try after losing the lock to a live drainer, doubling up to the backstop.
LOCK_BUSY_RETRY_S = 0.25
KICK_SOCKET_MODE = 0o600
MAX_DATAGRAM_BYTES = 64


def instance_lock_path(db_path: Path) -> Path:
    return Path(daemon_lock_file(db_path))


class InstanceLock:
    """The daemon's single-instance claim: an exclusive, non-blocking `flock` on
    `<db>.notifier.lock`, holding the holder's pid. Atomic where a look at the kick socket
    followed by a bind is not: two daemons started together could both see no listener."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self._lock = PidLock(instance_lock_path(db_path), "the daemon's lock file")
        self.path = self._lock.path

    def acquire(self) -> None:
        # The daemon may be the first process on a fresh data folder: made 0700, as the store
        # makes it, before the lock file goes into it.
        try:
            files.make_folders(self.db_path.parent)
        except OSError as exc:
            raise StoreError(f"cannot make the folder of {self.db_path}: {exc}") from exc
        if not self._lock.try_acquire():
            pid = self._lock.holder()
            raise DaemonAlreadyRunning(
                f"another notifier daemon (pid {pid}) already runs for {self.db_path} (it holds"
                f" {self.path}): {holders.advice(pid)}, or point COOP_DB elsewhere"
            )

    def holder(self) -> str:
        """The pid of the daemon holding the lock ("unknown" when it cannot be read)."""
        return self._lock.holder()

    def release(self) -> None:
        self._lock.release()


def may_spawn_drainer(db_path: Path) -> bool:
    """Whether a stopping daemon may hand its work to a spawned one-shot drainer: not in service
    mode (an owner file governs the store, or a broken one does), where only the owner service
    may write and the fence would refuse the drainer."""
    from engine.owner import owner_config

    try:
        return owner_config(db_path) is None
    except (CoopError, ValueError, KeyError):
        return False


def backend_options() -> dict[str, bool]:
    """anyio's asyncio options for a long-running process: uvloop when it is installed (a
    dependency on Linux; measured with the whole pipeline, its loop cuts the CPU per delivered
    row by about a fifth)."""
    import importlib.util

    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def http_client_factory(config: NotifierConfig) -> Callable[[], DoorClient]:
    def make() -> DoorClient:
        from notifier.client import HttpDoorClient  # httpx only once a lock is won

        return HttpDoorClient(str(config.door_socket), config.service_key, config.client_timeout_s)

    return make


class Daemon:
    """The notifier's long-running role (for `coop-notifier run` and `coop serve`)."""

    def __init__(
        self,
        config: NotifierConfig,
        *,
        connect: Callable[[], sqlite3.Connection] | None = None,
        client_factory: Callable[[], DoorClient] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._own_connections = connect is None
        self._connect = connect or (lambda: open_own_connection(config.db_path))
        self._client_factory = client_factory or http_client_factory(config)
        self._clock = clock
        self._deadlines = Deadlines(config.db_path, clock)
        self._worker: Worker | None = None
        self._wake: anyio.Event | None = None
        self._kicked = False
        self._stopping = False
        #: Called once the daemon has claimed the store and bound its kick socket (`coop serve`
        #: learns there that its daemon delivers).
        self.on_started: Callable[[], None] = lambda: None
        self.log = structlog.get_logger("notifier.daemon")

    @property
    def socket_path(self) -> Path:
        return engine_kick.socket_path(self.config.db_path)

    def kick(self) -> None:
        """Wake the daemon now (a row was committed). Call from the event loop's thread."""
        self._kicked = True
        if self._wake is not None:
            self._wake.set()

    def stop(self) -> None:
        """Finish the row in flight, then let `run()` return."""
        self._stopping = True
        if self._worker is not None:
            self._worker.stop()
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Claim the store, bind the kick socket, then drain and sleep until `stop()`."""
        if self._own_connections and delivery.owner_service_drains(self.config.db_path):
            raise ConfigError(
                f"the ledger {self.config.db_path} is in service mode: only its owner service"
                " (`coop serve`) drains it; run that instead, or `coop cutover --undo` first"
            )
        # Test-only seam: a daemon that found local mode, not yet holding the lock (a cutover
        # may land right here).
        fault("notifier.daemon.before_lock")
        instance = InstanceLock(self.config.db_path)
        instance.acquire()  # before any task group: a refusal stays one plain error
        try:
            await self._run()
        finally:
            instance.release()

    async def _run(self) -> None:
        # The ledger opened once before the start line: one it cannot open (not a database, a
        # folder in the way) stops the start in one line, rather than a retry forever after
        # "started" (`coop serve` does the same).
        self._connect().close()
        sock = await self._bind()  # first: a refusal leaves nothing to close, run() may retry
        db = Database(self._connect)
        worker = Worker(
            self.config,
            db=db,
            client_factory=self._client_factory,
            role="daemon",
            clock=self._clock,
        )
        self._worker = worker
        if self._stopping:
            worker.stop()
        self._wake = anyio.Event()
        work_left = False
        try:
            self.log.info("notifier.daemon.started", socket=str(self.socket_path))
            self.on_started()
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._receive_kicks, sock)
                work_left = await self._loop(db, worker)
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await sock.aclose()
                self.socket_path.unlink(missing_ok=True)
                try:
                    if work_left or self._stopping:
                        work_left = await db.call(delivery.due_head, self._clock) is not None
                except (NotifierError, CoopError) as exc:
                    # The store fails at the very end: the next start resumes whatever is left.
                    self.log.warning("notifier.daemon.stop_check_failed", error=str(exc))
                    work_left = False
                finally:
                    await worker.aclose()
                    await db.aclose()
        if work_left:
            if not may_spawn_drainer(self.config.db_path):
                # After a cutover only the owner service may write: a spawned drainer would be
                # fenced out. The owner's next start resumes the row.
                self.log.info("worker.handoff", outcome="left_to_owner_restart")
            else:
                done = engine_kick.kick(self.config.db_path)
                self.log.info("worker.handoff", outcome="kicked_successor", kick=done)
        self.log.info("notifier.daemon.stopped")

    async def _bind(self) -> UNIXDatagramSocket:
        path = self.socket_path
        # anyio replaces a socket file at the path: refuse first if a live daemon answers there.
        # Refused in the shape every service's start-up refusal has (`plumbing.listening`).
        where = f"{path} (the kick socket beside COOP_DB)"
        if path.exists() and engine_kick.send_datagram(self.config.db_path):
            raise DaemonAlreadyRunning(
                f"cannot listen on {where}: another notifier daemon answers there; stop it, or"
                " point COOP_DB elsewhere"
            )
        try:
            return await anyio.create_unix_datagram_socket(
                local_path=path, local_mode=KICK_SOCKET_MODE
            )
        except OSError as exc:
            raise StoreError(
                f"cannot listen on {where}: {listening.reason(exc)}; check that its folder is"
                " writable"
            ) from exc

    async def _receive_kicks(self, sock: UNIXDatagramSocket) -> None:
        while True:
            await sock.receive()
            self.kick()

    async def _loop(self, db: Database, worker: Worker) -> bool:
        """Drain and sleep until stopped; True when stopped with a due row left."""
        busy_retry_s = LOCK_BUSY_RETRY_S
        failures = 0
        while not self._stopping:
            kicked, self._kicked = self._kicked, False
            self._wake = anyio.Event()
            try:
                fault("notifier.daemon.before_drain")  # test-only seam: a daemon held asleep
                # Deadlines first: a close they make is drained in this same pass.
                next_deadline = await self._deadlines.apply_due(db)
                if not kicked and not await worker.door_listening():
                    # The door is still not running and nothing changed: no drain (it would
                    # write a try), just look again after the retry interval.
                    sleep_s = worker.retry_interval_s
                    if next_deadline is not None:
                        sleep_s = min(sleep_s, max(next_deadline - self._clock(), 0.0))
                    await self._rest(sleep_s)
                    continue
                report = await worker.drain()
                if report.outcome is DrainOutcome.STOPPED:
                    return True
                if self._stopping:
                    break
                if report.outcome is DrainOutcome.LOCK_BUSY:
                    sleep_s = min(busy_retry_s, self.config.backstop_s)
                    busy_retry_s *= 2
                else:
                    busy_retry_s = LOCK_BUSY_RETRY_S
                    head = await db.call(delivery.head)
                    if head is None:
                        sleep_s = self.config.backstop_s
                    else:
                        sleep_s = min(
                            max(head.next_attempt_at - self._clock(), 0.0), self.config.backstop_s
                        )
                if next_deadline is not None:  # sleep until the earliest deadline, no later
                    sleep_s = min(sleep_s, max(next_deadline - self._clock(), 0.0))
                failures = 0
            except Exception as exc:  # the daemon outlives any one failed drain
                if await self._steps_aside(db):
                    return False  # the owner service's daemon resumes what is pending
                failures += 1
                sleep_s = self._failed(exc, failures)
            if self._kicked or sleep_s <= 0:
                continue
            await self._rest(sleep_s)
        return False

    async def _rest(self, sleep_s: float) -> None:
        """Sleep until `sleep_s` has passed, a kick or a stop."""
        wake = self._wake
        if self._kicked or sleep_s <= 0 or wake is None:
            return
        with anyio.move_on_after(sleep_s):
            await wake.wait()

    async def _steps_aside(self, db: Database) -> bool:
        """After a failed drain: whether the cutover's fence refused it, this daemon not being
        the owner service's. Then it says so in one line and stops, releasing the ledger's
        lock, so that `coop serve`'s daemon (which tries that lock every second) takes
        delivery over: retrying could only be refused again, and kept the lock from it."""
        try:
            refused = await db.call(delivery.fence_refuses)
        except (NotifierError, CoopError):
            return False  # the store itself fails: the usual backoff
        if not refused:
            return False
        if may_spawn_drainer(self.config.db_path):  # a fence, but no owner file (or a bad one)
            note = (
                "the ledger carries the cutover's fence but no owner file (a cutover cut short):"
                " only coop serve's daemon can write it; run `coop cutover` again, or"
                " `coop cutover --undo`"
            )
        else:
            note = "the ledger is in service mode: coop serve's daemon delivers from now on"
        self.log.warning(
            "notifier.daemon.stepped_aside",
            reason="the cutover's fence refuses this daemon's writes",
            note=note + "; this daemon stops",
        )
        return True

    def _failed(self, exc: Exception, failures: int) -> float:
        """Log a failed drain; return how long to pause before the next one."""
        retry_in_s = min(
            self.config.backoff_base_s * 2 ** min(failures - 1, 30), self.config.backoff_max_s
        )
        fields = {
            "error": str(exc),
            "error_type": type(exc).__name__,
            "failures": failures,
            "retry_in_s": round(retry_in_s, 3),
        }
        if isinstance(exc, NotifierError | CoopError):
            self.log.warning("notifier.daemon.drain_failed", **fields)
        else:  # not an error the design names: keep its traceback for whoever reads the log
            self.log.error("notifier.daemon.drain_failed", exc_info=exc, **fields)
        return retry_in_s
