"""The phone's poll turn (chief/phone/updater.py) when Telegram answers a long poll at once with
nothing, as a Bot API that ignores getUpdates' `timeout` does: the next poll waits for the rest
of `Pauses.empty_poll_s` (about a second) instead of following at once. Against the emulator,
on real processes: tests/e2e/door/test_door_unreadable_replies.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from structlog.testing import capture_logs
from telegram import Update

from chief.phone.updater import Pauses, PhoneLoop
from chief.telegram.inbound import Buttons


class AtOnce:
    """A Bot API that answers every poll at once with nothing."""

    def __init__(self) -> None:
        self.polls = 0

    async def get_updates(self, offset: int | None, timeout_s: float) -> Sequence[Update]:
        self.polls += 1
        return []

    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int | None:
        raise AssertionError("nothing to answer")

    async def answer_callback(self, query_id: str, text: str) -> None:
        raise AssertionError("nothing to answer")

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        return None


DEFAULT = Pauses()


def _loop(telegram: AtOnce, pauses: Pauses = DEFAULT) -> PhoneLoop:
    nothing: Any = None  # an empty poll reads no store and runs no command
    return PhoneLoop(telegram, nothing, chat_id=1, user_id=1, commands=nothing, pauses=pauses)


async def test_a_poll_answered_at_once_with_nothing_waits_about_a_second_before_the_next() -> None:
    telegram = AtOnce()
    loop = _loop(telegram)
    with capture_logs() as logs:
        pauses = [await loop._step() for _ in range(3)]
    assert telegram.polls == 3
    # One poll per turn, and each turn asks for (nearly) the whole second before the next.
    assert all(0.5 < pause <= DEFAULT.empty_poll_s for pause in pauses), pauses
    # Said once per outage, not once per poll.
    said = [entry for entry in logs if entry["event"] == "door.phone_polls_not_held"]
    assert len(said) == 1, logs


async def test_the_pause_after_an_empty_poll_is_a_setting() -> None:
    loop = _loop(AtOnce(), Pauses(empty_poll_s=0.2))
    assert 0.1 < await loop._step() <= 0.2
