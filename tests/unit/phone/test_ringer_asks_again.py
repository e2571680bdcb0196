"""The sender task (chief/phone/ringer.py) while Telegram cannot be used (the sender's getMe
failed or could not be read) and nothing is queued: the door's status names the cause, and the
task asks again every UNUSABLE_RETRY_S, not at once and not in a loop, until it can."""

from __future__ import annotations

import math
from typing import Any

from chief.errors import TelegramUnavailable
from chief.phone.ringer import UNUSABLE_RETRY_S, Ringer


class EmptyQueue:
    """Nothing queued, nothing left in flight by a last run."""

    async def telegram_head(self, limit: int) -> list[Any]:
        return []

    async def record_doubts(self, reason: str, next_attempt_at: float | None) -> list[Any]:
        return []


class UnusableSender:
    """A sender whose getMe fails until `usable_after` more tries."""

    def __init__(self, usable_after: int) -> None:
        self.problem: TelegramUnavailable | None = TelegramUnavailable("getMe unreadable")
        self.tries = 0
        self.usable_after = usable_after

    async def start(self) -> None:
        self.tries += 1
        if self.tries >= self.usable_after:
            self.problem = None

    async def send(self, text: str, *, silent: bool = False) -> int | None:
        raise AssertionError("nothing is queued")


async def test_an_idle_sender_asks_again_while_telegram_cannot_be_used() -> None:
    now = [1000.0]
    sender = UnusableSender(usable_after=2)
    queue: Any = EmptyQueue()
    ringer = Ringer(queue, sender, chat_id="4242", monotonic=lambda: now[0])
    assert ringer.last_error == "getMe unreadable"  # the status names it while idle
    assert await ringer._step() == 0.0  # the start's turn: nothing was left in flight
    assert await ringer._step() == UNUSABLE_RETRY_S  # not due yet: no getMe at once
    assert sender.tries == 0
    now[0] += UNUSABLE_RETRY_S
    assert await ringer._step() == UNUSABLE_RETRY_S  # asked, still unusable: again later
    assert sender.tries == 1
    assert 0 < await ringer._step() <= UNUSABLE_RETRY_S  # a nudge does not ask again early
    assert sender.tries == 1
    now[0] += UNUSABLE_RETRY_S
    assert await ringer._step() == math.inf  # usable: sleep until nudged
    assert sender.tries == 2
    assert ringer.last_error is None
