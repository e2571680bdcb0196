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

The ladder (issue 35). With a second person paired (`chief telegram pair --second`), a report
nobody acknowledged within CHIEF_ESCALATE_AFTER_S climbs to rung 2 in the same turn of
`ring_due`: one ring with its own "Got it" in the second person's chat, queued in the
transaction that records the rung (`chief.store.urgent`), while the owner's repeats go on. The
first acknowledgement anywhere (`acknowledge(key, by=...)`, which every path takes: a tap, a
reply, `chief ack N`, a settle, a further rung's own) stops every rung; each message still
showing "Got it" is edited to say who acknowledged and when, and the Chief gets one line
naming who. `ringing()` lists what still rings with its rung: a further rung (the fallback
channel) reads it, records its rung with `chief.store.urgent.reach_rung`, and acknowledges
through `acknowledge`.

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
from chief.urgent_rules import (
    GOT_IT_PREFIX,
    OWNER,
    SECOND_RUNG,
    URGENT_MARK,
    UrgentBounds,
    ack_toast,
)
from plumbing.faults import fault

if TYPE_CHECKING:
    from chief.conversation import Chief
    from chief.store import ChiefStore
    from chief.store.urgent import Acked, Ringing, Stopped

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
        second_chat: str | None = None,
        escalated: Callable[[int], None] = lambda rung: None,
    ) -> None:
        self.store = store
        self.chief = chief
        self.bounds = bounds
        self._edits_queued = edits_queued
        self._count = count
        self._clock = clock
        #: the second person's chat (rung 2), None when nobody is paired as one
        self.second_chat = second_chat
        self._escalated = escalated
        #: wakes the nag task when a schedule comes sooner (set by the door when it runs)
        self.nudge_nags: Callable[[], None] = lambda: None

    # -- the nag task's source --------------------------------------------------------------

    async def ring_due(self, now: float) -> Due:
        """Queue the repeats due by `now` and expire the reports past their expiry, moving
        their schedules on, in one transaction; when the next falls due."""
        from chief.store import urgent

        turn = await self.store.urgent_write(urgent.ring_due, now, self.bounds, self.second_chat)
        for key in turn.escalated:
            fault("door.ladder_rung_queued")  # test-only: a kill before rung 2's send
            self._escalated(SECOND_RUNG)
            log.warning("door.urgent_escalated", urgent_key=key, rung=SECOND_RUNG)
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

    async def tap(self, token: str, by: str = OWNER) -> str | None:
        """A tap on a "Got it" button by `by` (a key of `WHO`): acknowledged (durably, once);
        the toast to show, or None when `token` is no "Got it" token of this chief.db."""
        from chief.store import urgent

        if not token.startswith(GOT_IT_PREFIX):
            return None
        acked = await self.store.urgent_write(urgent.acknowledge_token, token, self._clock(), by)
        if acked is None:
            return None
        if acked.stopped is not None:
            await self._acknowledged(acked.stopped, "got_it", by)
        return ack_toast(acked.stopped is None, acked.acked_at)

    async def reply(self, chat_id: int, message_id: int, by: str = OWNER) -> bool:
        """A reply by `by` to `message_id`: acknowledged when that message rang an urgent
        report (once); whether it did."""
        from chief.store import urgent

        acked = await self.store.urgent_write(
            urgent.acknowledge_message, chat_id, message_id, self._clock(), by
        )
        if acked is None:
            return False
        if acked.stopped is not None:
            await self._acknowledged(acked.stopped, "reply", by)
        return True

    async def acknowledge(self, key: str, *, by: str) -> Acked | None:
        """The report `key` acknowledged by `by` (a key of `WHO`: `machine` for `chief ack`),
        durably and once, every rung stopped; None when `key` names no urgent report. The
        entry point of every path that is not a tap or a reply on a message."""
        from chief.store import urgent

        acked = await self.store.urgent_write(urgent.acknowledge_key, key, self._clock(), by)
        if acked is not None and acked.stopped is not None:
            await self._acknowledged(acked.stopped, by, by)
        return acked

    async def key_of(self, reference: str) -> str | None:
        """The urgent key a number (`chief ack N`) or a key names; None: none."""
        from chief.store import urgent

        return await self.store.urgent_read(urgent.key_of, reference)

    async def ringing(self) -> list[Ringing]:
        """The urgent reports still ringing, with their rung (for a further rung)."""
        from chief.store import urgent

        return await self.store.urgent_read(urgent.ringing)

    async def _acknowledged(self, stopped: Stopped, via: str, by: str = OWNER) -> None:
        self._count(ACKNOWLEDGEMENTS)
        log.info("door.urgent_acknowledged", urgent_key=stopped.key, via=via, by=by)
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
        ringing = [self._with_next_step(row) for row in found.ringing]
        due = [row for row in ringing if row["next_at"] is not None]
        return {
            "ringing": ringing,
            "next": min(due, key=lambda row: float(str(row["next_at"]))) if due else None,
            "acknowledged": found.acknowledged,
            "expired_unacknowledged": found.expired_unacknowledged,
        }

    def _with_next_step(self, row: dict[str, object]) -> dict[str, object]:
        """A ringing report's status row with its ladder: the rung it reached, and its next
        step and when (`rung 2: the second person`, or its expiry)."""
        escalate_at = row.pop("escalate_at", None)
        if escalate_at is not None and self.second_chat is not None:
            return row | {"next_step": f"rung {SECOND_RUNG}: the second person",
                          "next_step_at": escalate_at}  # fmt: skip
        return row | {"next_step": "expiry", "next_step_at": row["expires_at"]}

    async def phone_lines(self) -> list[str]:
        """/status's lines: each urgent report still ringing (its number for `chief ack N`,
        its rung) or expired unacknowledged."""
        state = await self.status()
        lines = [
            f"URGENT, ringing (ring {row['rings']}, rung {row['rung']}, number "
            f"{row['number']}): {_unmarked(row['text'])}"
            for row in state["ringing"]
        ]
        lines += [
            f"URGENT, went unacknowledged: {_unmarked(row['text'])}"
            for row in state["expired_unacknowledged"]
        ]
        return lines


def _unmarked(text: object) -> str:
    return str(text).removeprefix(URGENT_MARK)
