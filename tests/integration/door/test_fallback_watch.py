"""What the fallback task is told of Telegram (`chief.serve.telegram_failing`), over a real
sender task and chief.db, with a double standing in for Telegram (the outside party): nothing
while sends go through; a send left unanswered past the Telegram deadline (in doubt, not yet
resolved) counts as failing; the in-doubt answer keeps it failing; the next send that goes
through clears it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.errors import TelegramUnavailable
from chief.phone.ringer import Ringer
from chief.serve import telegram_failing
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(30)
SLOW_AFTER_S = 0.2


class HangingTelegram:
    """The first send hangs until released, then its answer is lost; later sends are taken."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = anyio.Event()

    async def send(self, text: str, *, silent: bool = False) -> int:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
            raise TelegramUnavailable("the answer was lost", in_doubt=True)
        return 3000 + self.calls


async def test_an_unresolved_send_counts_as_telegram_failing_until_a_send_goes_through(
    tmp_path: Path,
) -> None:
    config = ChiefConfig(db_path=tmp_path / "chief.db", owner="owner")
    telegram = HangingTelegram()
    async with Chief.open(config) as chief, anyio.create_task_group() as tasks:
        ringer = Ringer(chief.store, telegram, chat_id="4242", slow_after_s=SLOW_AFTER_S)
        why = telegram_failing(ringer)
        await tasks.start(ringer.run)
        assert why() is None
        await chief.report_notify("row 1", "1", wait=1.0, queue_telegram=True)
        ringer.nudge()
        said = await wait_until(why, timeout_s=10, what="the hanging send to count as failing")
        assert said.startswith("a send has waited ")
        telegram.release.set()
        said = await wait_until(
            lambda: (words := why()) and "lost" in words and words, timeout_s=10,
            what="the in-doubt answer",
        )  # fmt: skip
        await wait_until(lambda: why() is None, timeout_s=15, what="the repeat going through")
        assert telegram.calls == 2
        ringer.stop()
        await ringer.stopped.wait()
        tasks.cancel_scope.cancel()
