"""The one-shot drainer's wait for a short deferral: no row without a wakeup when no daemon runs.

A drain ends with the idle handoff. If the head row is then deferred (the door refused it) and
no daemon listens, nothing would try that row again until some producer commits. So a one-shot
drainer whose drain released the lock with a deferred head due within `DRAIN_WAIT_MAX_S`
stays: it sleeps until the head is due and drains again, and repeats while the head stays
deferred that briefly. It exits when the queue is empty or the head is deferred longer: that
row is left to the daemon, to the systemd timer of CLI-only installs
(`ops/systemd/coop-notifier-retry.timer` runs `coop-notifier drain --no-wait` every minute), or
to the next kick. Either way a deferred head is tried again by its due time plus at most 60 s.
A door whose socket refuses connections defers the head by a second at a time (notifier.outcome):
the drainer then looks at the socket once a second (`Worker.door_listening`, which writes
nothing) and drains again once something listens, while the outage is younger than
`DRAIN_WAIT_MAX_S`; then it leaves the row the same way (its worker logs the outage, not this
module a line per second). Waiting costs no database write and next to no CPU.

One waiter per store, so a burst of kicks during an outage leaves one process waiting, not one
per kick: the wait is held under an exclusive `flock` on `<db>.drain-wait.lock`. A drainer that
finds it taken exits and trusts the waiter with its row. The waiter gives the flock back, then
looks at the head again before it exits, so a drainer that deferred the head and found the
flock taken just before is never left without a waiter (the shape of the idle handoff again).
While it sleeps the waiter holds no worker lock: a kicked drainer drains meanwhile as usual.
Only a head some worker already tried (attempts > 0) is waited for: a fresh row's producer
kicked, and the idle handoff guarantees it a worker. A waiter that keeps finding the worker
lock busy for a minute leaves: it gives the flock back first, so the holder, which hands off
after that, can become the waiter itself if its head is still deferred.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import structlog

from notifier import delivery
from notifier.delivery import Database, OutboxRow
from notifier.pidlock import PidLock
from notifier.worker import DrainOutcome, DrainReport, Worker

# A deferral this short is waited out by the drainer itself; a longer one is left to the daemon
# or the retry timer, whose period is this long too.
DRAIN_WAIT_MAX_S = 60.0
LOCK_BUSY_RETRY_S = 0.25
LOCK_BUSY_MAX_RETRY_S = 5.0


def wait_lock_path(db_path: Path) -> Path:
    return Path(str(db_path) + ".drain-wait.lock")


class WaitLock(PidLock):
    """The one waiter's claim: an exclusive, non-blocking `flock`, dropped by the kernel however
    its holder dies."""

    def __init__(self, db_path: Path) -> None:
        super().__init__(wait_lock_path(db_path), "the drainer's wait lock")


def _worth_waiting(head: OutboxRow | None, now_epoch: float, unreachable_s: float = 0.0) -> bool:
    """A head some worker deferred, due within the wait bound, while the door has not refused
    connections for longer than that bound (each refusal defers the head by only a second: a
    door down that long is left to the daemon or the retry timer, as a long deferral is)."""
    if head is None or head.attempts == 0 or unreachable_s > DRAIN_WAIT_MAX_S:
        return False
    return head.next_attempt_at - now_epoch <= DRAIN_WAIT_MAX_S


class Waiter:
    """Waits out short deferrals after a one-shot drain; see the module docstring."""

    def __init__(
        self,
        worker: Worker,
        db: Database,
        db_path: Path,
        stopped: anyio.Event,
        clock: Callable[[], float],
    ) -> None:
        self.worker = worker
        self.db = db
        self.db_path = db_path
        self.stopped = stopped
        self.clock = clock
        self.delivered = 0
        self.deferred = 0
        self.outcome: DrainOutcome | None = None
        self.log = structlog.get_logger("notifier.waiter").bind(owner=worker.me.owner)

    async def run(self) -> None:
        while not self.worker.stopping:
            head = await self.db.call(delivery.head)
            if not _worth_waiting(head, self.clock(), self.worker.unreachable_s):
                if head is not None and head.attempts > 0:
                    self.log.info(
                        "notifier.drain.left_deferred",
                        outbox_id=head.id,
                        due_in_s=round(head.next_attempt_at - self.clock(), 3),
                        note="left to the daemon, the retry timer or the next kick",
                    )
                return
            assert head is not None
            lock = WaitLock(self.db_path)
            if not lock.try_acquire():
                self.log.info("notifier.drain.left_to_waiter", outbox_id=head.id)
                return
            try:
                busy = await self._wait_and_drain()
            finally:
                lock.release()
            if busy and await self.db.call(delivery.lock_holder) is not None:
                # The flock is free again before that holder hands off: it waits if need be.
                self.log.info("notifier.drain.left_to_lock_holder", outbox_id=head.id)
                return
            # Loop: the flock is given back, so look at the head once more before leaving.

    async def _sleep(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await self.stopped.wait()

    async def _wait_and_drain(self) -> bool:
        """Sleep until the head is due and drain, while it is worth waiting for; True when the
        worker lock stayed busy for the whole wait bound."""
        busy_s = LOCK_BUSY_RETRY_S
        busy_since: float | None = None
        while not self.worker.stopping:
            head = await self.db.call(delivery.head)
            if not _worth_waiting(head, self.clock(), self.worker.unreachable_s):
                return False
            assert head is not None
            due_in_s = head.next_attempt_at - self.clock()
            if self.worker.unreachable_s:  # the worker tells an outage, not this loop
                # Rest a retry interval, then drain only if something listens now: a drain
                # writes its try, a look at the socket writes nothing.
                await self._sleep(self.worker.retry_interval_s)
                if self.worker.stopping:
                    return False
                if not await self.worker.door_listening():
                    continue
            elif due_in_s > 0:
                self.log.info(
                    "notifier.drain.waiting",
                    outbox_id=head.id,
                    due_in_s=round(due_in_s, 3),
                    pid=os.getpid(),
                )
                await self._sleep(due_in_s)
                if self.worker.stopping:
                    return False
            report = await self.worker.drain()
            self._count(report)
            if report.outcome is DrainOutcome.STOPPED:
                return False
            if report.outcome is DrainOutcome.LOCK_BUSY:
                # The holder drains; if it defers the head again, it leaves it to this waiter.
                now = self.clock()
                busy_since = now if busy_since is None else busy_since
                if now - busy_since >= DRAIN_WAIT_MAX_S:
                    return True
                await self._sleep(busy_s)
                busy_s = min(busy_s * 2, LOCK_BUSY_MAX_RETRY_S)
            else:
                busy_s = LOCK_BUSY_RETRY_S
                busy_since = None
        return False

    def _count(self, report: DrainReport) -> None:
        self.delivered += report.delivered
        self.deferred += report.deferred
        if report.outcome is not DrainOutcome.LOCK_BUSY or self.outcome is None:
            self.outcome = report.outcome
