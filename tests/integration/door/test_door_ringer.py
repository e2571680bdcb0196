"""The sender task over a real chief.db, with a test double standing in for Telegram (the outside
party): it outlives an unexpected failure of a send, and it keeps the queue's order."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.door.ringer import Ringer
from chief.errors import TelegramUnavailable

pytestmark = pytest.mark.timeout(30)


class FlakyTelegram:
    """Raises a bug-like error on the first send, refuses the second, then accepts."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bool]] = []
        self.calls = 0

    async def send(self, text: str, *, silent: bool = False) -> int:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("an unexpected failure inside the client")
        if self.calls == 2:
            raise TelegramUnavailable("refused", retry_after_s=None)
        self.sent.append((text, silent))
        return 1000 + len(self.sent)


async def test_the_sender_outlives_an_unexpected_failure_and_keeps_order(tmp_path: Path) -> None:
    config = ChiefConfig(db_path=tmp_path / "chief.db", owner="owner")
    telegram = FlakyTelegram()
    async with Chief.open(config) as chief, anyio.create_task_group() as tasks:
        ringer = Ringer(chief, telegram, chat_id="4242")
        await tasks.start(ringer.run)
        for n in (1, 2):
            _, reported = await chief.report_notify(
                f"row {n}", str(n), wait=1.0, queue_telegram=True
            )
            assert reported.telegram_seq is not None
            ringer.nudge()
        with anyio.fail_after(15):
            while await chief.sent_count() < 2:
                await anyio.sleep(0.02)
        ringer.stop()
        await ringer.stopped.wait()
        tasks.cancel_scope.cancel()
    assert telegram.sent in (
        [("2 updates\n\nrow 1\n\nrow 2", False)],
        [("row 1", False), ("row 2", False)],
    )
