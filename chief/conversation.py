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
insert, exactly as a drain pass would (the hop and the waiters per key are chief.landing's); a
landing that fails leaves the rows queued and nudges the drainer. Either way one party at a
time lands rows, always under the turn lock.

The turn lock is in-process: host applications and the door share one `Chief` per process, and
the door refuses a second instance on the same chief.db. Two drainers in different processes
would still never land a row twice (each pass runs under BEGIN IMMEDIATE and rereads the queue).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import structlog

from chief.config import ChiefConfig
from chief.errors import ChiefConfigError, ChiefError
from chief.landing import DRAIN_BATCH_ROWS, Landings, ReportHop, accept_and_land
from chief.model import (
    NO_EXTRAS,
    Extras,
    Message,
    check_message,
    check_report_text,
    report_key,
    turn_kind_for_key,
)
from chief.store import (
    Accepted,
    ChiefStore,
    ReportRow,
    TelegramQueueStatus,
)

log = structlog.get_logger("chief")

# The source prefix of a Coop outbox row's report (the door's key: one line per outbox row).
NOTIFY_SOURCE_PREFIX = "coop-notify:"

# After a failed pass the drainer retries on its own too (doubling, capped), so a transient
# failure such as a full disk does not wait for the next report to be noticed.
DRAIN_RETRY_FIRST_S = 1.0
DRAIN_RETRY_MAX_S = 60.0


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
        self._landings = Landings()
        self._log = log.bind(chief_id=chief_id)

    @property
    def store(self) -> ChiefStore:
        """The Chief's chief.db store: the door's sender and ask task work on its Telegram
        queue and asks directly (a report still goes through the Chief, under its turn lock)."""
        return self._store

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
        check_report_text(text)
        row = ReportRow(report_key(source_id), text, None, source_conversation_id)
        [(message_id, _)] = await self._report_rows([row], wait, queue_telegram=False)
        return message_id

    async def report_notify(
        self,
        text: str,
        outbox_id: str,
        *,
        wait: float | None,
        queue_telegram: bool,
        extras: Extras = NO_EXTRAS,
    ) -> tuple[int | None, Accepted]:
        """`report(text, 'coop-notify:<outbox_id>', wait)` for the door. In the same transaction
        as the report row: whether the door already rang Telegram for that row and, with
        `queue_telegram`, its Telegram entry queued unless it was rung (or is queued already)
        or `extras` says not to ring; an ask's buttons, a settle's void buttons and edits."""
        [answer] = await self.report_notify_batch(
            [(text, outbox_id)], wait=wait, queue_telegram=queue_telegram, extras=[extras]
        )
        return answer

    async def report_notify_batch(
        self,
        rows: list[tuple[str, str]],
        *,
        wait: float | None,
        queue_telegram: bool,
        extras: list[Extras] | None = None,
    ) -> list[tuple[int | None, Accepted]]:
        """`report_notify` for several `(text, outbox_id)` rows, in order, in ONE chief.db
        transaction: every row's report row and Telegram entry are durable, or none is. `wait`
        bounds the whole batch's wait to land. `extras`: each row's, in order (none: none).
        One (message id or None, Accepted) per row."""
        for text, _ in rows:
            check_report_text(text)
        report_rows = [
            ReportRow(report_key(NOTIFY_SOURCE_PREFIX + outbox_id), text, outbox_id, None, extra)
            for (text, outbox_id), extra in zip(
                rows, extras or [NO_EXTRAS] * len(rows), strict=True
            )
        ]
        return await self._report_rows(report_rows, wait, queue_telegram)

    async def _report_rows(
        self, rows: list[ReportRow], wait: float | None, queue_telegram: bool
    ) -> list[tuple[int | None, Accepted]]:
        """Accept the rows durably (one transaction), land them in the same hop when nobody
        else may be landing, and wait at most `wait` for the rest to land."""
        # Registered before the accept, so a landing that happens before we wait is seen.
        with self._landings.awaiting([row.key for row in rows]) as waiting:
            hop = await self._accept_and_land(rows, queue_telegram)
            self._after_landing(hop)
            message_ids = await waiting.wait(hop.rows, wait)
        for row, message_id in zip(rows, message_ids, strict=True):
            if message_id is None:
                self._log.info("chief.report.deferred", source_key=row.key, wait_s=wait)
        return list(zip(message_ids, hop.rows, strict=True))

    async def _accept_and_land(self, rows: list[ReportRow], queue_telegram: bool) -> ReportHop:
        """One hop: accept the rows, and land them when nobody else may be landing (no turn
        held, the drainer idle: the turn lock is taken for the hop). Otherwise, or when that
        landing fails, the drainer is nudged (`_after_landing`) and lands them."""
        args = (accept_and_land, self.chief_id, rows, queue_telegram)
        if self._done < self._wanted or self._turn_lock.locked():
            return await self._store.in_one_hop(*args, None)
        self._turn_lock.acquire_nowait()  # free (checked above, no await since)
        try:
            # Shielded, as the drainer's pass: once rows landed, their waiters must hear of it.
            with anyio.CancelScope(shield=True):
                hop = await self._store.in_one_hop(*args, turn_kind_for_key)
        finally:
            self._turn_lock.release()
        return hop

    def _after_landing(self, hop: ReportHop) -> None:
        """Tell the waiters what landed; nudge the drainer for whatever did not."""
        self._announce(hop.landed)
        if hop.land_error is not None:
            self._log.error(
                "chief.drain.failed",
                error=hop.land_error,
                action="rows stay queued; the drainer retries them",
            )
        if hop.land_error is not None or hop.more or (hop.unlanded and not hop.landed):
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

    async def sent_count(self) -> int:
        """How many Coop outbox rows the door has rung Telegram for."""
        return await self._store.sent_count()

    # -- the door's Telegram queue (see chief.store: queued with the report, left with the mark)

    async def queue_telegram(self, text: str) -> tuple[int, int]:
        """Queue a Telegram entry that has no outbox row; its queue seq and the entries ahead."""
        return await self._store.queue_telegram(text)

    async def telegram_status(self) -> TelegramQueueStatus:
        """The Telegram queue as an operator sees it."""
        return await self._store.telegram_status()

    # -- the door's answers (the sender and the ask task work on `store` itself)

    async def pending_answers(self) -> int:
        """The owner's answers from the phone still waiting for the ledger."""
        return await self._store.pending_answers()

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
                            self.chief_id, turn_kind_for_key, DRAIN_BATCH_ROWS
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
        naming every key: an event costs ~65 us of CPU, about as much as landing a row. The
        Chief's message is `chief_message_id` in every service's lines (Telegram's is
        `telegram_message_id`)."""
        if len(landed) == 1:
            [(key, message_id)] = landed
            self._log.info("chief.report.landed", source_key=key, chief_message_id=message_id)
        elif landed:
            self._log.info(
                "chief.report.landed",
                source_keys=[key for key, _ in landed],
                chief_message_ids=[message_id for _, message_id in landed],
            )
        self._landings.announce(landed)


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
