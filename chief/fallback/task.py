"""The fallback task (issue 35, rung 3): it watches whether Telegram delivers and, when it has
not for CHIEF_FALLBACK_AFTER_S, sends the outage's notice and each urgent report still ringing
through the fallback channel, exactly once.

    loop:
      at start          each send the last run left in flight is in doubt: it goes again,
                        marked "possibly a repeat" (the door died between the send and its mark)
      look              why Telegram cannot deliver (the sender's words, in memory; after a
                        restart the queue head's last error, durable), recorded in ONE chief.db
                        transaction (`chief.store.fallback.look`): an outage opens at the first
                        failure; past the delay its notice and each ringing report are queued,
                        once each; a delivery ends it and queues ONE Telegram message listing
                        what went through the fallback meanwhile
      the allowance     at most CHIEF_FALLBACK_MAX_PER_HOUR messages an hour; the hour's last
                        carries every entry still waiting (`chief.fallback_rules.next_message`)
      in flight         the carried entries' send id, committed (FULL) before the send
      send              the channel (`chief.fallback.channel`), in a worker thread
      mark              sent, one transaction, shielded from cancellation; on failure deferred
                        RETRY_S, counted `failed`

While Telegram delivers and no outage is open the look costs no chief.db hop: the sender's state
is read in memory.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from chief.errors import ChiefError
from chief.fallback_rules import (
    FAILED,
    REPEATED,
    SENT,
    FallbackSettings,
    Message,
    clock,
    next_message,
)
from chief.phone.loop import DoorLoop
from chief.urgent_rules import FALLBACK_RUNG
from plumbing.faults import fault

if TYPE_CHECKING:
    from chief.fallback.channel import Channel
    from chief.store import ChiefStore
    from chief.store.fallback import Turn

log = structlog.get_logger("chief.door")

# How often the task looks at Telegram (at most; sooner when the delay is shorter).
LOOK_S = 5.0
# After a send the channel did not take, or a chief.db failure, try again after this long.
RETRY_S = 30.0
READ_RETRY_S = 1.0


class Fallback(DoorLoop):
    """The fallback task; `run` inside the door's task group."""

    failed_event = "door.fallback_failed"

    def __init__(
        self,
        store: ChiefStore,
        channel: Channel,
        settings: FallbackSettings,
        telegram_failing: Callable[[], str | None],
        *,
        telegram_queued: Callable[[], None] = lambda: None,
        count: Callable[[str], None] = lambda result: None,
        escalated: Callable[[int], None] = lambda rung: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.store = store
        self.channel = channel
        self.settings = settings
        self._telegram_failing = telegram_failing
        self._telegram_queued = telegram_queued
        self._count = count
        self._escalated = escalated
        self._clock = clock
        self._look_s = min(LOOK_S, max(settings.after_s / 4, 0.25))
        # Whether chief.db holds an open outage or entries to send (read at start).
        self._busy = True
        # The channel's failure now, logged when it changes, not at every try (every RETRY_S).
        self._channel_failing: str | None = None

    def _retry_s(self) -> float:
        return READ_RETRY_S

    async def _after_start(self) -> None:
        from chief.store import fallback

        doubts = await self.store.fallback_write(fallback.record_doubts)
        if doubts:
            log.warning(
                "door.fallback_in_doubt",
                entries=doubts,
                reason="the door stopped between a fallback send and its mark; it goes again, "
                "marked as a possible repeat",
            )

    async def _step(self) -> float:
        failing = self._telegram_failing()
        if failing is None and not self._busy:
            return self._look_s
        turn = await self._look(failing)
        pause_s = await self._send_due(turn)
        return min(pause_s, self._look_s)

    async def _look(self, failing: str | None) -> Turn:
        from chief.store import fallback

        now = self._clock()
        if failing is None and self._busy:
            failing = await self.store.fallback_read(fallback.durable_failure)
        turn = await self.store.fallback_write(fallback.look, now, failing, self.settings.after_s)
        if turn.queued:
            log.warning("door.fallback_queued", entries=turn.queued, why=failing)
        for _ in range(turn.climbed):
            self._escalated(FALLBACK_RUNG)
        if turn.told:
            log.info("door.fallback_over", note="Telegram delivers again; told on Telegram")
            self._telegram_queued()
        return turn

    async def _send_due(self, turn: Turn) -> float:
        """Send the next message due, if any; the pause until the next turn."""
        from chief.store import fallback

        now = self._clock()
        found = await self.store.fallback_read(fallback.waiting, now)
        self._busy = turn.outage is not None or bool(found.entries) or found.pending
        message = next_message(found.entries, found.sent_in_hour, self.settings.max_per_hour)
        if message is None:
            later = [at for at in (found.next_attempt_at,) if at is not None]
            if found.entries and found.hour_frees_at is not None:
                later.append(found.hour_frees_at)
            return max(0.0, min(later) - now) if later else self._look_s
        repeat = any(entry.repeat for entry in found.entries if entry.seq in message.seqs)
        await self._send(message, repeat)
        return 0.0

    async def _send(self, message: Message, repeat: bool) -> None:
        from chief.store import fallback

        send_id = uuid.uuid4().hex
        bound = log.bind(send_id=send_id, entries=len(message.seqs), repeat=repeat)
        # The in-flight record: a death from here to the mark is known at the next start.
        await self.store.fallback_write(fallback.begin_send, message.seqs, send_id)
        fault("door.fallback.before_send")
        error = await self.channel.send(message.title, message.body)
        fault("door.fallback.after_send")
        with anyio.CancelScope(shield=True):  # it went out: record it even when stopping
            if error is None:
                await self._mark(fallback.mark_sent, send_id, self._clock())
                self._count(REPEATED if repeat else SENT)
                self._channel_failing = None
                bound.warning("door.fallback_sent", title=message.title)
                return
            await self._mark(fallback.defer, send_id, self._clock() + RETRY_S, error)
        self._count(FAILED)
        if error != self._channel_failing:
            self._channel_failing = error
            bound.error(
                "door.fallback_send_failed",
                error=error,
                retry_in_s=RETRY_S,
                note="logged once until a send goes through or the error changes",
            )

    async def _mark(self, use_case: Callable[..., None], *args: Any) -> None:
        try:
            await self.store.fallback_write(use_case, *args)
        except ChiefError as exc:
            # Left in flight: the next start sends it again, marked as a possible repeat.
            log.error("door.fallback_mark_failed", error=str(exc))

    # -- what an operator sees ---------------------------------------------------------------

    async def phone_lines(self) -> list[str]:
        """/status's line on the phone: the outage it stands in for, or that it stands by."""
        state = await self.status()
        since = state["telegram_failing_since"]
        sent = f"{state['sent']} sent in all, {state['waiting']} waiting"
        if since is None:
            return [f"Fallback channel: standing by ({sent})"]
        return [f"Fallback channel: Telegram failing since {clock(float(since))} ({sent})"]

    async def status(self) -> dict[str, Any]:
        """The door status's `fallback` part."""
        from chief.store import fallback

        found = await self.store.fallback_read(fallback.status, self._clock())
        return {"configured": True, "after_s": self.settings.after_s} | found
