"""The phone's urgent reports (issue 28): rung loud until the owner acknowledges them.

A notify row with `urgent: true` lands its Chief line marked `URGENT: ` and queues its ring in
the report's transaction (`chief.store.reports`, `chief.store.urgent`). The sender rings it
alone, with sound whatever the quiet hours or /quiet, with a "Got it" button below an urgent
request's choices (`chief.phone.ringer`). From then on:

    repeat      every CHIEF_URGENT_RERING_S, this module's `ring_due` (a source of the nag
                task, `chief.phone.jobqueue`) queues `URGENT, again (ring N, waiting M min): ...`
                and moves the schedule on, in ONE chief.db transaction: a door killed before the
                commit queued nothing, one killed after it finds the repeat queued (and rings it
                once)
    one button  when a newer ring is marked sent, each older message of the report loses its
                buttons (an edit on the ask task's queue, `chief.phone.asks`, with its backoff)
    acknowledge "Got it" tapped (`tap`), a reply to any of its messages (`reply`), or the
                settle of an urgent request's ask (answered from the phone, or closed anyhow:
                `chief.store.asks.settle`): recorded in chief.db (one FULL commit) before the
                toast, once (a double tap or a replayed update finds it acknowledged), with its
                Chief line `acknowledged at HH:MM (after N rings): ...` in the same commit and
                its repeats not yet sent taken off the queue
    expire      at CHIEF_URGENT_EXPIRE_S after it was accepted, the same turn of `ring_due`
                stops it and lands `went unacknowledged after N rings in M min: ...`; so
                does the settle of an urgent request its deadline decided (nobody answered:
                `... (its deadline decided it with no answer)`), never as an acknowledgement

A repeat already in flight when the acknowledgement commits still rings (and loses its button
at once): re-ringing stops within one interval. The door's status shows what rings (each with
its next due time and expiry) and the expiries nobody acknowledged; /status on the phone lists
them; /metrics counts rings, acknowledgements and expiries.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from chief.phone.jobqueue import Due
from chief.urgent_rules import GOT_IT_PREFIX, URGENT_MARK, UrgentBounds, ack_toast

if TYPE_CHECKING:
    from chief.conversation import Chief
    from chief.store import ChiefStore
    from chief.store.urgent import Stopped

log = structlog.get_logger("chief.door")

# What the counters count (`coop_urgent_<kind>_total`, chief.door.metrics).
RINGS, ACKNOWLEDGEMENTS, EXPIRIES = "rings", "acknowledgements", "expiries"


class Urgent:
    """The urgent source of the nag task, and the acknowledgements the phone brings."""

    def __init__(
        self,
        store: ChiefStore,
        chief: Chief,
        bounds: UrgentBounds,
        *,
        edits_queued: Callable[[], None] = lambda: None,
        count: Callable[[str], None] = lambda kind: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chief = chief
        self.bounds = bounds
        self._edits_queued = edits_queued
        self._count = count
        self._clock = clock
        #: wakes the nag task when a schedule comes sooner (set by the door when it runs)
        self.nudge_nags: Callable[[], None] = lambda: None

    # -- the nag task's source --------------------------------------------------------------

    async def ring_due(self, now: float) -> Due:
        """Queue the repeats due by `now` and expire the reports past their expiry, moving
        their schedules on, in one transaction; when the next falls due."""
        from chief.store import urgent

        turn = await self.store.urgent_write(urgent.ring_due, now, self.bounds)
        if turn.queued:
            log.info("door.urgent_repeats_queued", repeats=turn.queued)
        for stopped in turn.expired:
            self._count(EXPIRIES)
            log.warning("door.urgent_expired", urgent_key=stopped.key, line=stopped.line)
            await self._land(stopped)
        if turn.expired:
            self._edits_queued()
        return Due(turn.queued, turn.next_at)

    def rung(self) -> None:
        """The sender marked an urgent ring sent: count it; the older rings' edits are queued."""
        self._count(RINGS)
        self._edits_queued()

    def accepted(self) -> None:
        """An urgent report was accepted: the nag task schedules it."""
        self.nudge_nags()

    # -- acknowledgements -------------------------------------------------------------------

    async def tap(self, token: str) -> str | None:
        """A tap on a "Got it" button: acknowledged (durably, once); the toast to show, or None
        when `token` is no "Got it" token of this chief.db."""
        from chief.store import urgent

        if not token.startswith(GOT_IT_PREFIX):
            return None
        acked = await self.store.urgent_write(urgent.acknowledge_token, token, self._clock())
        if acked is None:
            return None
        if acked.stopped is not None:
            await self._acknowledged(acked.stopped, "got_it")
        return ack_toast(acked.stopped is None, acked.acked_at)

    async def reply(self, chat_id: int, message_id: int) -> bool:
        """A reply to `message_id`: acknowledged when that message rang an urgent report (once);
        whether it did."""
        from chief.store import urgent

        acked = await self.store.urgent_write(
            urgent.acknowledge_message, chat_id, message_id, self._clock()
        )
        if acked is None:
            return False
        if acked.stopped is not None:
            await self._acknowledged(acked.stopped, "reply")
        return True

    async def _acknowledged(self, stopped: Stopped, via: str) -> None:
        self._count(ACKNOWLEDGEMENTS)
        log.info("door.urgent_acknowledged", urgent_key=stopped.key, via=via)
        self._edits_queued()
        self.nudge_nags()
        await self._land(stopped)

    async def _land(self, stopped: Stopped) -> None:
        """Land a line its transaction queued (it is durable already: a failure here leaves it
        to the drainer's next pass)."""
        try:
            await self.chief.report(stopped.line, stopped.source_id, wait=0.0)
        except Exception as exc:  # the line is queued; the door must go on
            log.error("door.urgent_line_failed", urgent_key=stopped.key, error=str(exc))

    # -- what the owner and an operator see ---------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """The door status's `urgent` part (the contract's shape)."""
        from chief.store import urgent

        now = self._clock()
        found = await self.store.urgent_read(urgent.status, now)
        ringing = found.ringing
        due = [row for row in ringing if row["next_at"] is not None]
        return {
            "ringing": ringing,
            "next": min(due, key=lambda row: float(str(row["next_at"]))) if due else None,
            "acknowledged": found.acknowledged,
            "expired_unacknowledged": found.expired_unacknowledged,
        }

    async def phone_lines(self) -> list[str]:
        """/status's lines: each urgent report still ringing or expired unacknowledged."""
        state = await self.status()
        lines = [
            f"URGENT, ringing (ring {row['rings']}): {_unmarked(row['text'])}"
            for row in state["ringing"]
        ]
        lines += [
            f"URGENT, went unacknowledged: {_unmarked(row['text'])}"
            for row in state["expired_unacknowledged"]
        ]
        return lines


def _unmarked(text: object) -> str:
    return str(text).removeprefix(URGENT_MARK)
