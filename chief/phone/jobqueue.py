"""The phone's job queue, the nag task: the rings that come back on their own at a due time (a
request's reminders, an urgent report's repeats) are put on the Telegram queue when they fall
due.

Each kind keeps its schedule in chief.db, a due time (epoch seconds) per row, and is a
`DueRings` source: `ring_due(now)` queues, in one chief.db transaction each, what is due by
`now` and moves its schedule on (so a restart never queues one due time twice), and says when
the next falls due. This task only sleeps between them:

    loop:
      every source       queue what is due; the earliest next due time
      anything queued    nudge the sender
      sleep              until the earliest due time, or until nudged (a new schedule, a
                         settle, an acknowledgement, the owner's /quiet): never a poll

The wall clock decides (a due time outlives the process); a sleep is cut to `MAX_SLEEP_S` so a
clock set forward by hand is noticed within a minute, and costs one wakeup a minute at most.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from chief.phone.loop import DoorLoop

log = structlog.get_logger("chief.door")

# The longest sleep with something scheduled: a wall clock moved forward is seen within it.
MAX_SLEEP_S = 60.0
# After a turn that raised (chief.db could not be read), try again after this long.
RETRY_S = 1.0


@dataclass(frozen=True)
class Due:
    """What one source did in a turn: rings queued, and when its next falls due (epoch
    seconds; None: nothing scheduled)."""

    queued: int
    next_at: float | None


class DueRings(Protocol):
    """A kind of ring that comes back at a due time (a request's reminders, an urgent repeat)."""

    async def ring_due(self, now: float) -> Due:
        """Queue on the Telegram queue what is due by `now`, moving its schedule on in the same
        transaction; say what was queued and when the next falls due."""
        ...


class Nagger(DoorLoop):
    """The nag task; `run` inside the door's task group."""

    failed_event = "door.nags_failed"

    def __init__(
        self,
        sources: Sequence[DueRings],
        ring: Callable[[], None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.sources = list(sources)
        self._ring = ring
        self._clock = clock
        #: the earliest due time seen at the last turn (epoch seconds), for the door's status
        self.next_at: float | None = None

    def _retry_s(self) -> float:
        return RETRY_S

    async def _step(self) -> float:
        now = self._clock()
        queued = 0
        soonest = math.inf
        for source in self.sources:
            due = await source.ring_due(now)
            queued += due.queued
            if due.next_at is not None:
                soonest = min(soonest, due.next_at)
        if queued:
            self._ring()
        self.next_at = None if soonest == math.inf else soonest
        if soonest == math.inf:
            return math.inf
        return min(MAX_SLEEP_S, max(soonest - self._clock(), 0.0))
