"""The drain loop under the worker lock, and the atomic idle handoff.

One worker drains at a time, FIFO by id, a batch of due head rows at a time:

    claim the lock (check-and-claim in one BEGIN IMMEDIATE; a provably dead holder is taken over)
    rows = the due head run (up to COOP_BATCH_MAX rows from the head, in id order, while due)
    loop:
        no due row  -> release_worker_if_idle(owner)      # one BEGIN IMMEDIATE transaction
                         WORK_AVAILABLE -> read the due head run again, drain on
                         RELEASED       -> stop (outcome `released`)
        stopping    -> release, stop (outcome `stopped`; the caller kicks if work is left)
        max_runs    -> release, stop (outcome `max_runs`; rows left wait for the next kick)
        else        -> POST the rows (one row: the notify route; more: the batch route); mark
                       each delivered or deferred and read the next due run in ONE transaction

A batch keeps FIFO: the door judges and answers each row, and the rows are marked in order up
to the first one it did not deliver, which is deferred with the door's reason as its own
`last_error`; the rows behind it stay as they were (pending, untried by this attempt: the door
held them). A batch request that fails whole (timeout, 503, refused connection) defers the head
row alone, as a single POST's failure does; one refused whole for its size (413, or a 422
naming the door's row limit) is posted again at once with fewer rows, down to one (`_send_batch`).
A door without the batch route (404) is remembered for the process's life, said once
(`notifier.batch.unsupported`), and the drain goes on one row per POST.

While nothing listens on the door's socket, the head is deferred by COOP_UNREACHABLE_RETRY_S (1 s)
at a time, not backed off, and the outage is told in a few lines (`Outage`), not one per try.
A waiter (the daemon, a one-shot drainer's `notifier.waiter`) then looks every interval whether
anything listens (`door_listening`: a connect, nothing written) and drains again only when
something does, or when a kick says something changed: an outage costs no database write and
next to no CPU, however long it lasts.

The handoff predicate ("is there work?") is exactly the drain's own: *the head pending row
(lowest id) exists and is due* (never attempted, or `next_attempt_at <= now`, with `now` read
inside the handoff's transaction). So:

- a deferred head holds the rows behind it (strict FIFO) and does not count as work: a
  one-shot drain releases the lock and exits, logging the deferred head and when it is due.
  That row is left to the daemon (which sleeps until it is due) or to the next kick (a
  producer's commit, or `coop outbox retry N`, which makes it due now).
- a row a producer commits while the worker decides it is idle is never stranded: producers
  insert under BEGIN IMMEDIATE too, so either the insert committed first and the handoff sees
  it (`WORK_AVAILABLE`), or the handoff committed first and the producer's kick finds the lock
  free.

A worker that loses the lock to a live holder does nothing (`lock_busy`): the holder drains
every due row and hands off atomically.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from engine.store import now_iso
from notifier import delivery, metrics
from notifier.config import NotifierConfig
from notifier.delivery import Database, IdleHandoff, OutboxRow
from notifier.holder import Holder, this_worker
from notifier.outcome import (
    BackoffPolicy,
    Deferred,
    Delivered,
    DoorReply,
    Outcome,
    classify,
    classify_batch,
    door_batch_limit,
    smaller_batch,
)
from plumbing.faults import fault

if TYPE_CHECKING:
    from notifier.client import DoorClient


class DrainOutcome(enum.Enum):
    RELEASED = "released"  # idle handoff: nothing due, lock deleted
    LOCK_BUSY = "lock_busy"  # a live worker holds the lock; it drains
    MAX_RUNS = "max_runs"  # bounded drain reached its count, lock released
    STOPPED = "stopped"  # asked to stop; the row in flight was finished, lock released


@dataclass(frozen=True)
class DrainReport:
    outcome: DrainOutcome
    delivered: int = 0
    deferred: int = 0
    holder: Holder | None = None  # the live holder, for LOCK_BUSY


# While nothing listens on the door's port the head row is tried every COOP_UNREACHABLE_RETRY_S
# (1 s): an hour's outage is ~3,600 tries. The log says it when it begins, then once every
# this many seconds while it lasts (~60 lines an hour), and once when the door answers again.
OUTAGE_LOG_EVERY_S = 60.0


class Outage:
    """The door's port refusing connections, as this worker has seen it (times from its
    clock): when it began, how many tries it refused, when the log last said so; and how many
    tries of the head row were refused, over every outage of this process.

    Those tries count in the row's `attempts` (the store counts every try), but never reached
    the door: the backoff of the row's next real failure (a timeout, a 503) is counted without
    them (`free_tries`), so a door that comes back answering 503 for a moment is tried again
    after seconds, not at the cap an hour of refused tries would give. Only the head is ever
    tried while the door is down, so one row's count is all there is to keep; a restart forgets
    it (the backoff then counts every attempt)."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._said_at = 0.0
        self.tries = 0
        self._row: tuple[int, int] | None = None  # (outbox id, its refused tries)

    def free_tries(self, outbox_id: int) -> int:
        """How many of `outbox_id`'s attempts were refused connections (0 if none here)."""
        return self._row[1] if self._row is not None and self._row[0] == outbox_id else 0

    @property
    def active(self) -> bool:
        return self._since is not None

    def down_s(self, now: float) -> float:
        return 0.0 if self._since is None else max(now - self._since, 0.0)

    def refused(self, now: float, outbox_id: int) -> bool:
        """Count one refused try of the head `outbox_id`; True when the log should say so (the
        first, then rarely)."""
        self.tries += 1
        self._row = (outbox_id, self.free_tries(outbox_id) + 1)
        if self._since is None:
            self._since = self._said_at = now
            return True
        if now - self._said_at >= OUTAGE_LOG_EVERY_S:
            self._said_at = now
            return True
        return False

    def probed(self, now: float) -> bool:
        """Count one refused probe (a connect, no row tried); True when the log should say so."""
        self.tries += 1
        if now - self._said_at >= OUTAGE_LOG_EVERY_S:
            self._said_at = now
            return True
        return False

    def end(self, now: float) -> tuple[float, int] | None:
        """The door answered: (how long it was down, its refused tries), or None if it was not."""
        if self._since is None:
            return None
        ended = (self.down_s(now), self.tries)
        self._since, self.tries = None, 0
        return ended


class Worker:
    """Drains the outbox under the worker lock; one instance, one identity, one door client.

    `client_factory` is called once, after the first lock is won (a drainer that loses the
    lock never builds an HTTP client). `me` lets a caller that already claimed the lock under
    that identity hand it over (the claim is re-entrant for its owner). `idle_seam` is a test
    hook run between the drain's empty read and its handoff: the seam where a producer's row
    must not be stranded.
    """

    def __init__(
        self,
        config: NotifierConfig,
        *,
        db: Database,
        client_factory: Callable[[], DoorClient],
        role: str = "drain",
        me: Holder | None = None,
        clock: Callable[[], float] = time.time,
        rand: Callable[[], float] = random.random,
        idle_seam: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.db = db
        self.me = me or this_worker(role)
        self._client_factory = client_factory
        self._client: DoorClient | None = None
        self._clock = clock
        self._rand = rand
        self._idle_seam = idle_seam
        self._policy = BackoffPolicy(
            base_s=config.backoff_base_s,
            max_s=config.backoff_max_s,
            unreachable_retry_s=config.unreachable_retry_s,
        )
        self._outage = Outage()
        self._stopping = False
        self._batch_max = config.batch_max
        # False once the door answered 404 to the batch route: single rows for this process.
        self._batch_route = config.batch_max > 1
        self.log = structlog.get_logger("notifier.worker").bind(owner=self.me.owner)

    def stop(self) -> None:
        """Finish the row in flight, then end the drain (releasing the lock)."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def unreachable_s(self) -> float:
        """How long the door's port has refused this worker's connections (0: it has not)."""
        return self._outage.down_s(self._clock())

    @property
    def retry_interval_s(self) -> float:
        """How often a door that is not running is asked again (COOP_UNREACHABLE_RETRY_S)."""
        return min(self._policy.unreachable_retry_s, self._policy.max_s)

    async def door_listening(self) -> bool:
        """Whether a drain is worth its writes now: True unless this worker saw the door not
        running and nothing listens at its socket yet. The look is a connect, no row is tried
        and nothing is written: a waiter asks this every retry interval during an outage, and
        drains (which counts and writes a try) only once the door is back or something changed.
        A refused look counts as a try of the outage and is told as rarely as one."""
        if not self._outage.active:
            return True
        if self._client is None:
            self._client = self._client_factory()
        if await self._client.listening():
            return True
        now = self._clock()
        if self._outage.probed(now):
            self.log.warning(
                "notifier.door.unreachable",
                socket=str(self.config.door_socket),
                tries=self._outage.tries,
                down_s=round(self._outage.down_s(now), 3),
                note=f"nothing listens: looked again every {self.retry_interval_s:g} s;"
                f" said again every {OUTAGE_LOG_EVERY_S:g} s while it lasts",
            )
        return False

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def drain(self, max_runs: int | None = None) -> DrainReport:
        """Claim the lock and deliver due rows until the idle handoff releases it."""
        claim, rows = await self.db.call(
            delivery.claim_lock_and_due_run, self.me, now_iso(), self._clock, self._batch_max
        )
        if not claim.acquired:
            holder = claim.holder
            self.log.info(
                "worker.lock.busy",
                holder=holder.owner if holder else None,
                holder_pid=holder.pid if holder else None,
            )
            return DrainReport(DrainOutcome.LOCK_BUSY, holder=holder)
        self._log_acquired(claim, quiet=self._outage.active)
        if self._client is None:
            self._client = self._client_factory()
        delivered = deferred = 0
        released = False
        outcome = DrainOutcome.RELEASED
        try:
            while True:
                if not rows:
                    released, rows = await self._hand_off()
                    if released:
                        await self._log_released(delivered, deferred)
                        break
                    continue
                if self._stopping:
                    outcome = DrainOutcome.STOPPED
                    break
                if max_runs is not None:
                    if delivered + deferred >= max_runs:
                        outcome = DrainOutcome.MAX_RUNS
                        break
                    rows = rows[: max_runs - delivered - deferred]
                rows, done, failed = await self._deliver_run(rows)
                delivered += done
                deferred += failed
        finally:
            if not released:
                await self._give_back(outcome, delivered, deferred)
        metrics.record_drain(outcome.value)
        return DrainReport(outcome, delivered=delivered, deferred=deferred)

    def _log_acquired(self, claim: delivery.Claim, *, quiet: bool) -> None:
        if claim.taken_over_from is not None:
            dead = claim.taken_over_from
            self.log.warning(
                "worker.lock.taken_over",
                dead_owner=dead.owner,
                dead_pid=dead.pid,
                dead_host=dead.host,
                reason=claim.reason,
            )
        if not quiet:  # a drain per second while the door is down: the outage says it all
            self.log.info("worker.lock.acquired", pid=self.me.pid)

    async def _hand_off(self) -> tuple[bool, list[OutboxRow]]:
        """Nothing due at the last look: the atomic idle handoff. (True, []) when it released
        the lock; (False, the due head run, maybe empty) when a row arrived meanwhile and the
        drain goes on."""
        if self._idle_seam is not None:
            await self._idle_seam()
        # The same seam for real processes (a test holds a drainer here).
        fault("notifier.before_handoff")
        # The clock goes in, not a time read here: the handoff reads it under its write lock,
        # after any producer that committed meanwhile (seed 002).
        handoff = await self.db.call(delivery.release_worker_if_idle, self.me.owner, self._clock)
        if handoff is IdleHandoff.RELEASED:
            return True, []
        self.log.info("worker.handoff", outcome=handoff.value)
        return False, await self.db.call(delivery.due_run, self._clock, self._batch_max)

    async def _give_back(self, outcome: DrainOutcome, delivered: int, deferred: int) -> None:
        """A drain that ends with work left (stopped, max runs, an error) gives the lock back."""
        # Shielded: a cancelled drain must still give the lock back while it can.
        with anyio.CancelScope(shield=True):
            await self.db.call(delivery.release_lock, self.me.owner)
        self.log.info(
            "worker.handoff",
            outcome=outcome.value,
            delivered=delivered,
            deferred=deferred,
            work_left=True,
        )
        self.log.info("worker.lock.released")

    async def _deliver_run(self, rows: list[OutboxRow]) -> tuple[list[OutboxRow], int, int]:
        """One attempt at the due head run `rows`: one POST (the batch route for two rows or
        more, while the door has it), every outcome recorded in one transaction. Returns the
        next due run and how many rows were delivered and deferred."""
        assert rows
        rows, reply, outcomes = await self._post(rows)
        now = self._clock()
        if any(isinstance(outcome, Delivered) for outcome in outcomes):
            # Door answered 2xx, rows not yet marked: a crash here re-sends them on restart
            # (at-least-once; the door deduplicates per destination by outbox_id).
            fault("notifier.after_door_answer")
        pairs = list(zip(rows, outcomes, strict=False))
        # Shielded: the door's answer must be recorded even if the drain is being cancelled.
        with anyio.CancelScope(shield=True):
            recorded = await self.db.call(
                delivery.record_batch, self.me.owner, pairs, now, now_iso(), self._batch_max
            )
        for (_, outcome), applied in zip(pairs, recorded.applied, strict=True):
            metrics.record_attempt(reply, outcome, applied)
        self._note_outage(*pairs[0])
        delivered = self._log_outcomes(pairs, recorded.applied, batch=len(rows) > 1)
        return recorded.next_due, delivered, len(pairs) - delivered

    def _note_outage(self, head: OutboxRow, outcome: Outcome) -> None:
        """Tell the door's outage (nothing listens on its socket) in a few lines, not one per
        try: when it begins, every OUTAGE_LOG_EVERY_S while it lasts, and when it ends. (A
        refused connection fails the whole POST, so its outcome is the head row's.)"""
        now = self._clock()
        if isinstance(outcome, Deferred) and outcome.unreachable:
            if self._outage.refused(now, head.id):
                self.log.warning(
                    "notifier.door.unreachable",
                    socket=str(self.config.door_socket),
                    outbox_id=head.id,
                    attempt=head.attempts + 1,
                    tries=self._outage.tries,
                    down_s=round(self._outage.down_s(now), 3),
                    error=outcome.error,
                    note=f"nothing listens: tried again every {outcome.retry_in_s:g} s;"
                    f" said again every {OUTAGE_LOG_EVERY_S:g} s while it lasts",
                )
            return
        ended = self._outage.end(now)
        if ended is not None:
            down_s, tries = ended
            self.log.info("notifier.door.reachable", down_s=round(down_s, 3), tries=tries)

    async def _post(
        self, rows: list[OutboxRow]
    ) -> tuple[list[OutboxRow], DoorReply, list[Outcome]]:
        """POST the run: (the rows the POST carried, the door's reply, their outcomes in order;
        rows past the last outcome stay pending, untried)."""
        assert self._client is not None
        if len(rows) > 1 and self._batch_route:
            rows, reply = await self._send_batch(rows)
            if len(rows) > 1 and reply.status != 404:
                outcomes = classify_batch(
                    reply,
                    [self._backoff_row(row) for row in rows],
                    policy=self._policy,
                    now_epoch=self._clock(),
                    rand=self._rand(),
                )
                return rows, reply, outcomes
            if reply.status == 404:
                # A door without the batch route (an older Chief): the single route from now
                # on, for this process's life; said once.
                self._batch_route = False
                self.log.warning(
                    "notifier.batch.unsupported",
                    url=self.config.batch_url,
                    note="the door answered 404; one row per POST from now on",
                )
        reply = await self._client.send(rows[0])
        return rows[:1], reply, [self._classify(reply, rows[0])]

    async def _send_batch(self, rows: list[OutboxRow]) -> tuple[list[OutboxRow], DoorReply]:
        """POST `rows` to the batch route, and again with fewer rows while the door refuses the
        batch whole for its size (`smaller_batch`: its row limit, else half, at once: a batch
        refused whole recorded nothing, so FIFO is unchanged). Returns the rows of the last POST
        and its reply; one row left (with the refusal's reply) goes to the single route.

        What is learned is kept for the process's life, said once per narrowing
        (`notifier.batch.limited`): the row limit the door named, at once; after a 413, the
        size the door then took (two rows or more: a lone row that fits says nothing of the
        door when the row refused was one too large on its own)."""
        assert self._client is not None
        size_refused = False
        while True:
            reply = await self._client.send_batch(rows)
            smaller = smaller_batch(reply, len(rows))
            if smaller is None:
                break
            size_refused = True
            named = door_batch_limit(reply)
            if named is not None:
                self._narrow(named, reason="422")
            rows = rows[:smaller]
            if len(rows) == 1:
                return rows, reply
        if size_refused and reply.status is not None and 200 <= reply.status < 300:
            self._narrow(len(rows), reason="413")
        return rows, reply

    def _narrow(self, limit: int, *, reason: str) -> None:
        """The door takes at most `limit` rows a batch (its CHIEF_NOTIFY_BATCH_MAX, or its body
        limit, is below our COOP_BATCH_MAX): batches of that size from now on, said once."""
        if limit >= self._batch_max:
            return
        self.log.warning(
            "notifier.batch.limited",
            rows=limit,
            was=self._batch_max,
            reason=reason,
            note="the door takes smaller batches (CHIEF_NOTIFY_BATCH_MAX, its body limit);"
            " set COOP_BATCH_MAX to match",
        )
        self._batch_max = limit

    def _log_outcomes(
        self, pairs: list[tuple[OutboxRow, Outcome]], applied: list[bool], *, batch: bool
    ) -> int:
        """Log what one POST's outcomes did; returns how many rows were delivered. The rows a
        batch delivered are ONE event naming every row (an event costs ~65 us of CPU, more
        than the rest of a row's delivery in a large batch); a single POST's row, a deferral
        and a row cancelled in flight are one event each."""
        # (outbox id, delivery key, attempt) delivered and marked: the ledger's row id, and the
        # key the door's lines name the same row by (`delivery_key`)
        delivered: list[tuple[int, str, int]] = []
        count = 0
        for (row, outcome), was_applied in zip(pairs, applied, strict=True):
            attempt = row.attempts + 1
            if isinstance(outcome, Delivered):
                count += 1
            if not was_applied:
                self.log.warning("outbox.cancelled_in_flight", outbox_id=row.id, attempt=attempt)
            elif isinstance(outcome, Delivered):
                delivered.append((row.id, row.delivery_key, attempt))
            elif not outcome.unreachable:  # an outage is told by `_note_outage`
                self.log.warning(
                    "outbox.deferred",
                    outbox_id=row.id,
                    attempt=attempt,
                    retry_in_s=round(outcome.retry_in_s, 3),
                    error=outcome.error,
                )
        if delivered and batch:
            self.log.info(
                "outbox.delivered",
                outbox_ids=[outbox_id for outbox_id, _, _ in delivered],
                delivery_keys=[key for _, key, _ in delivered],
                attempts=[attempt for *_, attempt in delivered],
                batch=len(pairs),
            )
        elif delivered:
            [(outbox_id, key, attempt)] = delivered
            self.log.info(
                "outbox.delivered", outbox_id=outbox_id, delivery_key=key, attempt=attempt
            )
        return count

    def _backoff_row(self, row: OutboxRow) -> OutboxRow:
        """`row` with the attempts its backoff counts: not its refused connections (`Outage`)."""
        free = self._outage.free_tries(row.id)
        return row._replace(attempts=max(row.attempts - free, 0)) if free else row

    def _classify(self, reply: DoorReply, row: OutboxRow) -> Outcome:
        return classify(
            reply,
            attempt=self._backoff_row(row).attempts + 1,
            policy=self._policy,
            now_epoch=self._clock(),
            rand=self._rand(),
        )

    async def _log_released(self, delivered: int, deferred: int) -> None:
        if self._outage.active and not delivered:
            return  # a drain per second while the door is down: the outage says it all
        head = await self.db.call(delivery.head)
        if head is None:
            self.log.info(
                "worker.handoff", outcome="released", delivered=delivered, deferred=deferred
            )
        else:
            self.log.info(
                "worker.handoff",
                outcome="released",
                delivered=delivered,
                deferred=deferred,
                deferred_head=head.id,
                due_in_s=round(max(head.next_attempt_at - self._clock(), 0.0), 3),
                note="the deferred head waits for its due time (notifier.waiter, the daemon)",
            )
        self.log.info("worker.lock.released")


async def release_worker_if_idle(
    db: Database, owner: str, clock: Callable[[], float] = time.time
) -> IdleHandoff:
    """The service verb: the atomic idle handoff for `owner` (see notifier.delivery); the clock is
    read inside its transaction."""
    return await db.call(delivery.release_worker_if_idle, owner, clock)
