"""The Master Chief: the owner's one conversation, its turn lock, report() and its one drainer.

Durable before anything waits. `report()` commits the line to chief_report_outbox first (from
then on it survives a crash or power cut), nudges the Chief's one drainer, and waits at most
`wait` seconds for it to land. The drainer is a task of the Chief's own task group, never of the
caller, so a caller whose wait runs out (or who is cancelled) leaves it running: the row lands
when the Chief is free. This is the fix for "the bug that rang twice": a report used to wait on
the turn lock inside its caller with no bound, the caller's client timed out and retried, and
each retry added a waiter.

The drainer takes the turn lock that every live chat turn holds (`async with chief.turn()`), so
a report never lands between a turn's user message and its reply. It appends every undelivered
row in outbox order; the append and the record on the outbox row are one transaction.

The fast path: when no turn is held and the drainer is idle, report() takes the turn lock
itself and lands the queue (its own row last, in outbox order) in the same thread hop as its
insert, exactly as a drain pass would; a landing that fails leaves the rows queued and nudges
the drainer. Either way one party at a time lands rows, always under the turn lock.

The turn lock is in-process: host applications and the door share one `Chief` per process, and
the door refuses a second instance on the same chief.db. Two drainers in different processes
would still never land a row twice (each pass runs under BEGIN IMMEDIATE and rereads the queue).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.abc
import structlog

from chief.config import ChiefConfig
from chief.errors import ChiefConfigError, ChiefError
from chief.model import (
    Message,
    check_message,
    check_report_text,
    report_key,
    turn_kind_for_key,
)
from chief.store import (
    BatchReported,
    ChiefStore,
    InDoubt,
    NotifyRow,
    QueuedRing,
    Reported,
    TelegramQueueStatus,
)

log = structlog.get_logger("chief")

R = TypeVar("R")

# The source prefix of a Coop outbox row's report (the door's key: one line per outbox row).
NOTIFY_SOURCE_PREFIX = "coop-notify:"

# After a failed pass the drainer retries on its own too (doubling, capped), so a transient
# failure such as a full disk does not wait for the next report to be noticed.
DRAIN_RETRY_FIRST_S = 1.0
DRAIN_RETRY_MAX_S = 60.0


@dataclass
class _Landing:
    """What the reporters of one key wait on; the drainer fills it in when the key lands."""

    event: anyio.Event = field(default_factory=anyio.Event)
    message_id: int | None = None
    waiters: int = 0


class Chief:
    """The owner's Master Chief. Create it with `async with Chief.open(config) as chief:`."""

    def __init__(self, store: ChiefStore, owner: str, chief_id: int) -> None:
        self.owner = owner
        self.chief_id = chief_id
        self.db_path: Path = store.path
        self._store = store
        self._turn_lock = anyio.Lock()
        # Drain passes asked for / finished: a nudge bumps `_wanted`; the drainer runs a pass
        # whenever `_done < _wanted`, so a nudge during a pass is never lost.
        self._wanted = 0
        self._done = 0
        self._wake = anyio.Event()
        self._pass_finished = anyio.Event()
        self._landings: dict[str, _Landing] = {}
        self._log = log.bind(chief_id=chief_id)

    @classmethod
    @asynccontextmanager
    async def open(cls, config: ChiefConfig) -> AsyncIterator[Chief]:
        """Open and migrate chief.db, resolve the owner's Master Chief, start its one drainer
        and drain whatever a restart left waiting. The drainer stops when the block exits."""
        if config.owner is None:
            raise ChiefConfigError(
                "CHIEF_OWNER is not set — set it to the owner whose Master Chief receives reports"
            )
        async with ChiefStore.open(config.db_path) as store:
            chief = cls(store, config.owner, await store.resolve_chief(config.owner))
            chief._log.info("chief.opened", owner=chief.owner, db_path=str(chief.db_path))
            body_error: Exception | None = None
            async with anyio.create_task_group() as tasks:
                await tasks.start(chief._drain_forever)
                try:
                    await chief.resume_reports()
                    yield chief
                except Exception as exc:
                    # Re-raised below, outside the task group, so callers see their own
                    # exception and not an ExceptionGroup wrapping it.
                    body_error = exc
                finally:
                    tasks.cancel_scope.cancel()
            if body_error is not None:
                raise body_error

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """The Chief's turn lock: wrap every live chat turn (user message .. reply) in it.
        The drainer takes the same lock, so no report lands inside a turn. Not reentrant."""
        async with self._turn_lock:
            yield

    async def report(
        self,
        text: str,
        source_id: str,
        wait: float | None = 2.0,
        source_conversation_id: str | None = None,
    ) -> int | None:
        """Land `text` in the conversation once per `source_id` ('coop-notify:<id>' or
        'cron:<job>'). Returns the message id, or None when `wait` seconds ran out first (the
        row is durable and lands when the Chief is free). `wait=None` waits until it lands."""
        message_id, _ = await self._report(
            text, source_id, wait, source_conversation_id, None, queue_telegram=False
        )
        return message_id

    async def report_notify(
        self, text: str, outbox_id: str, *, wait: float | None, queue_telegram: bool
    ) -> tuple[int | None, Reported]:
        """`report(text, 'coop-notify:<outbox_id>', wait)` for the door. In the same transaction
        as the report row: whether the door already rang Telegram for that row and, with
        `queue_telegram`, its Telegram entry queued unless it was rung (or is queued already)."""
        return await self._report(
            text, NOTIFY_SOURCE_PREFIX + outbox_id, wait, None, outbox_id, queue_telegram
        )

    async def report_notify_batch(
        self, rows: list[tuple[str, str]], *, wait: float | None, queue_telegram: bool
    ) -> list[tuple[int | None, Reported]]:
        """`report_notify` for several `(text, outbox_id)` rows, in order, in ONE chief.db
        transaction: every row's report row and Telegram entry are durable, or none is. `wait`
        bounds the whole batch's wait to land. One (message id or None, Reported) per row."""
        for text, _ in rows:
            check_report_text(text)
        keys = [report_key(NOTIFY_SOURCE_PREFIX + outbox_id) for _, outbox_id in rows]
        # Registered before the insert, as in `_report`.
        landings = [self._landings.setdefault(key, _Landing()) for key in keys]
        for landing in landings:
            landing.waiters += 1
        try:
            store_rows = [
                NotifyRow(key, text, outbox_id)
                for key, (text, outbox_id) in zip(keys, rows, strict=True)
            ]
            reported = await self._enqueue_batch(store_rows, queue_telegram)
            deadline_s = math.inf if wait is None else max(wait, 0.0)
            with anyio.move_on_after(deadline_s):
                for row, landing in zip(reported.rows, landings, strict=True):
                    if row.message_id is None:
                        await landing.event.wait()
            answers = []
            for key, row, landing in zip(keys, reported.rows, landings, strict=True):
                message_id = row.message_id if row.message_id is not None else landing.message_id
                if message_id is None:
                    self._log.info("chief.report.deferred", source_key=key, wait_s=wait)
                answers.append((message_id, row))
            return answers
        finally:
            for key, landing in zip(keys, landings, strict=True):
                landing.waiters -= 1
                if landing.waiters == 0 and self._landings.get(key) is landing:
                    del self._landings[key]

    async def _report(
        self,
        text: str,
        source_id: str,
        wait: float | None,
        source_conversation_id: str | None,
        sent_for: str | None,
        queue_telegram: bool,
    ) -> tuple[int | None, Reported]:
        check_report_text(text)
        key = report_key(source_id)
        # Registered before the insert, so a landing that happens before we start waiting is
        # still seen.
        landing = self._landings.setdefault(key, _Landing())
        landing.waiters += 1
        try:
            reported = await self._enqueue(
                key, text, source_conversation_id, sent_for, queue_telegram
            )
            if reported.message_id is not None:
                return reported.message_id, reported
            deadline_s = math.inf if wait is None else max(wait, 0.0)
            # Waiting on the landing event, never on the drainer: running out cancels nothing.
            with anyio.move_on_after(deadline_s):
                await landing.event.wait()
            if landing.message_id is None:
                self._log.info("chief.report.deferred", source_key=key, wait_s=wait)
            return landing.message_id, reported
        finally:
            landing.waiters -= 1
            if landing.waiters == 0 and self._landings.get(key) is landing:
                del self._landings[key]

    async def _enqueue(
        self,
        key: str,
        text: str,
        source_conversation_id: str | None,
        sent_for: str | None,
        queue_telegram: bool,
    ) -> Reported:
        """Queue the row durably, and land it in the same hop when nobody else may be landing:
        no turn held and the drainer idle (no pass asked for or running). Otherwise, or when
        that landing fails, the drainer is nudged and lands it."""

        async def write(land: Callable[[str], str] | None) -> Reported:
            return await self._store.report(
                self.chief_id,
                key,
                text,
                source_conversation_id,
                sent_for=sent_for,
                queue_telegram=queue_telegram,
                land=land,
            )

        reported = await self._write_then_land(write)
        self._after_landing(
            reported.message_id is None, reported.landed, reported.more, reported.land_error
        )
        return reported

    async def _enqueue_batch(self, rows: list[NotifyRow], queue_telegram: bool) -> BatchReported:
        """`_enqueue` for a notify batch: every row queued in one transaction (all or none),
        then landed in the same hop under the same rule."""

        async def write(land: Callable[[str], str] | None) -> BatchReported:
            return await self._store.report_batch(
                self.chief_id, rows, queue_telegram=queue_telegram, land=land
            )

        reported = await self._write_then_land(write)
        unlanded = any(row.message_id is None for row in reported.rows)
        self._after_landing(unlanded, reported.landed, reported.more, reported.land_error)
        return reported

    async def _write_then_land(
        self, write: Callable[[Callable[[str], str] | None], Awaitable[R]]
    ) -> R:
        """Run `write(land)`: with `land` (the turn lock taken for the hop) when no turn is held
        and the drainer is idle, else with None (the drainer will land the rows)."""
        if self._done < self._wanted or self._turn_lock.locked():
            return await write(None)
        self._turn_lock.acquire_nowait()  # free (checked above, no await since)
        try:
            # Shielded, as the drainer's pass: once rows landed, their waiters must hear of it.
            with anyio.CancelScope(shield=True):
                written = await write(turn_kind_for_key)
        finally:
            self._turn_lock.release()
        return written

    def _after_landing(
        self,
        unlanded: bool,
        landed: list[tuple[str, int]],
        more: bool,
        land_error: str | None,
    ) -> None:
        """Tell the waiters what landed; nudge the drainer for whatever did not."""
        self._announce(landed)
        if land_error is not None:
            self._log.error(
                "chief.drain.failed",
                error=land_error,
                action="rows stay queued; the drainer retries them",
            )
        if land_error is not None or more or (unlanded and not landed):
            self._nudge()

    async def append_message(
        self, role: str, content: str, turn_kind: str = "chat", origin: str = "user"
    ) -> int:
        """Append a host's chat message (call it inside `turn()`) and return its id."""
        check_message(role, content, turn_kind, origin)
        return await self._store.append_message(self.chief_id, role, content, turn_kind, origin)

    async def resume_reports(self) -> None:
        """Drain whatever is waiting (what a restart left, or a row a failed pass left behind)
        and return once a pass that started after this call has finished. Waits for the turn
        lock like any pass: do not call it from inside `turn()`."""
        target = self._nudge()
        while self._done < target:
            finished = self._pass_finished
            await finished.wait()

    async def undelivered_count(self) -> int:
        """Reports queued for this Chief that have not landed yet."""
        return await self._store.undelivered_count(self.chief_id)

    async def recent_messages(self, limit: int = 50) -> list[Message]:
        """The last `limit` messages of the conversation, oldest first."""
        return await self._store.recent_messages(self.chief_id, limit)

    async def notify_sent(self, outbox_id: str) -> bool:
        """Whether the door already rang Telegram for this Coop outbox row."""
        return await self._store.notify_sent(outbox_id)

    async def mark_notify_sent(self, outbox_id: str, telegram_message_id: int | None) -> None:
        """Record that Telegram accepted this row (INSERT OR IGNORE: a repeat writes nothing)."""
        await self._store.mark_notify_sent(outbox_id, telegram_message_id)

    async def sent_count(self) -> int:
        """How many Coop outbox rows the door has rung Telegram for."""
        return await self._store.sent_count()

    # -- the door's Telegram queue (see chief.store: queued with the report, left with the mark)

    async def queue_telegram(self, text: str) -> tuple[int, int]:
        """Queue a Telegram entry that has no outbox row; its queue seq and the entries ahead."""
        return await self._store.queue_telegram(text)

    async def telegram_head(self, limit: int) -> list[QueuedRing]:
        """The first `limit` entries of the Telegram queue, oldest first."""
        return await self._store.telegram_head(limit)

    async def mark_rung(
        self, seqs: list[int], outbox_ids: list[str], telegram_message_id: int
    ) -> None:
        """Mark the rows one Telegram message carried as sent and take them off the queue."""
        await self._store.mark_rung(seqs, outbox_ids, telegram_message_id)

    async def defer_rings(self, seqs: list[int], next_attempt_at: float, error: str) -> None:
        """Record a failed try of these entries and when to try again."""
        await self._store.defer_rings(seqs, next_attempt_at, error)

    async def begin_send(self, seqs: list[int], send_id: str) -> None:
        """Record durably, before the send, that send `send_id` carries these entries."""
        await self._store.begin_send(seqs, send_id)

    async def record_doubts(self, reason: str, next_attempt_at: float | None) -> list[InDoubt]:
        """Turn each send still in flight into an in-doubt event (its rows ring once more, as
        one group, marked); with `next_attempt_at`, not before it."""
        return await self._store.record_doubts(reason, next_attempt_at)

    async def telegram_status(self) -> TelegramQueueStatus:
        """The Telegram queue as an operator sees it."""
        return await self._store.telegram_status()

    # -- the drainer -------------------------------------------------------------------------

    def _nudge(self) -> int:
        self._wanted += 1
        self._wake.set()
        return self._wanted

    async def _drain_forever(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The one drainer of this Chief: sleeps until nudged, then runs a pass."""
        task_status.started()
        retry_s: float | None = None
        while True:
            if self._done >= self._wanted:
                self._wake = anyio.Event()
                with anyio.move_on_after(math.inf if retry_s is None else retry_s) as timer:
                    await self._wake.wait()
                if timer.cancelled_caught:
                    self._wanted += 1  # a timed retry after a failed pass
                continue
            target = self._wanted
            ok = await self._drain_pass()
            # Doubling from DRAIN_RETRY_FIRST_S, capped; reset by the first pass that succeeds.
            retry_s = (
                None if ok else min(2 * (retry_s or DRAIN_RETRY_FIRST_S / 2), DRAIN_RETRY_MAX_S)
            )
            self._done = target
            finished, self._pass_finished = self._pass_finished, anyio.Event()
            finished.set()

    async def _drain_pass(self) -> bool:
        """Land every undelivered row, a batch per transaction, each batch under the turn lock
        (released between batches so a waiting chat turn is not starved by a backlog)."""
        more = True
        while more:
            async with self._turn_lock:
                # Shielded: once the transaction ran, its landings must reach the waiters even
                # if the Chief is closing.
                with anyio.CancelScope(shield=True):
                    try:
                        landed, more = await self._store.land_undelivered(
                            self.chief_id, turn_kind_for_key
                        )
                    except Exception as exc:  # the drainer must outlive any failure
                        self._log.error(
                            "chief.drain.failed",
                            error=str(exc),
                            error_type=type(exc).__name__,
                            action="rows stay queued; the next nudge or report retries them",
                        )
                        return False
            self._announce(landed)
        return True

    def _announce(self, landed: list[tuple[str, int]]) -> None:
        """Tell the waiters of each landed key its message id. One log event per landing,
        naming every key: an event costs ~65 us of CPU, about as much as landing a row."""
        if len(landed) == 1:
            [(key, message_id)] = landed
            self._log.info("chief.report.landed", source_key=key, message_id=message_id)
        elif landed:
            self._log.info(
                "chief.report.landed",
                source_keys=[key for key, _ in landed],
                message_ids=[message_id for _, message_id in landed],
            )
        for key, message_id in landed:
            landing = self._landings.pop(key, None)
            if landing is not None:
                landing.message_id = message_id
                landing.event.set()


async def read_log(config: ChiefConfig, *, limit: int, owner: str | None = None) -> list[Message]:
    """The last `limit` messages of a Master Chief, for `chief log` (starts no drainer).
    The owner is `owner`, else CHIEF_OWNER, else the only owner in the file."""
    async with ChiefStore.open(config.db_path, create=False) as store:
        who = owner or config.owner
        if who is None:
            owners = await store.owners()
            if len(owners) != 1:
                raise ChiefConfigError(
                    f"{config.db_path} holds {len(owners)} Master Chiefs — set CHIEF_OWNER or "
                    "pass --owner to pick one"
                )
            who = owners[0]
        chief_id = await store.find_chief(who)
        if chief_id is None:
            raise ChiefError(
                f"{config.db_path} has no Master Chief for {who!r} yet — it is created when the "
                "door first starts with CHIEF_OWNER set"
            )
        return await store.recent_messages(chief_id, limit)
