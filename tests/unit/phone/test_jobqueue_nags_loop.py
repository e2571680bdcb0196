"""The nag task (chief/phone/jobqueue.py): it asks every source for what is due, nudges the sender
only when something was queued, and sleeps until the earliest next due time (at most
MAX_SLEEP_S), or until nudged when nothing is scheduled: never a poll."""

from __future__ import annotations

import math

from chief.phone.jobqueue import MAX_SLEEP_S, Due, Nagger


class Schedule:
    """A source with due times: `ring_due` queues each one due by `now` and drops it."""

    def __init__(self, due_at: list[float]) -> None:
        self.due_at = sorted(due_at)
        self.asked: list[float] = []

    async def ring_due(self, now: float) -> Due:
        self.asked.append(now)
        due = [at for at in self.due_at if at <= now]
        self.due_at = [at for at in self.due_at if at > now]
        return Due(len(due), self.due_at[0] if self.due_at else None)


def nagger(*sources: Schedule, now: float) -> tuple[Nagger, list[int]]:
    rings: list[int] = []
    return Nagger(sources, lambda: rings.append(1), clock=lambda: now), rings


async def test_nothing_scheduled_sleeps_until_nudged() -> None:
    task, rings = nagger(Schedule([]), Schedule([]), now=100.0)
    assert await task._step() == math.inf
    assert rings == []
    assert task.next_at is None


async def test_a_due_ring_nudges_the_sender_once_and_sleeps_until_the_next() -> None:
    first, second = Schedule([99.0, 100.0, 130.0]), Schedule([110.0])
    task, rings = nagger(first, second, now=100.0)
    assert await task._step() == 10.0
    assert rings == [1]
    assert first.due_at == [130.0]
    assert second.due_at == [110.0]
    assert task.next_at == 110.0


async def test_nothing_due_yet_rings_nothing() -> None:
    task, rings = nagger(Schedule([105.0]), now=100.0)
    assert await task._step() == 5.0
    assert rings == []


async def test_a_far_due_time_sleeps_at_most_a_minute() -> None:
    task, _ = nagger(Schedule([100.0 + 3600]), now=100.0)
    assert await task._step() == MAX_SLEEP_S
