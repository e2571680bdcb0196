"""The sender task over a real chief.db, with a test double standing in for Telegram (the outside
party): it outlives an unexpected failure of a send, and it keeps the queue's order."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.errors import TelegramUnavailable
from chief.phone.pacing import REPEAT_MARKER
from chief.phone.ringer import Ringer

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
        ringer = Ringer(chief.store, telegram, chat_id="4242")
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


class DoubtfulTelegram:
    """The first send goes out and its answer is lost (in doubt); then every send is taken."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.calls = 0
        self.first = anyio.Event()
        self.release = anyio.Event()

    async def send(self, text: str, *, silent: bool = False) -> int:
        self.calls += 1
        self.sent.append(text)
        if self.calls == 1:
            self.first.set()
            await self.release.wait()
            raise TelegramUnavailable("the answer was lost", in_doubt=True)
        return 2000 + self.calls


async def test_a_send_in_doubt_rings_again_as_the_same_group_marked_not_grown(
    tmp_path: Path,
) -> None:
    config = ChiefConfig(db_path=tmp_path / "chief.db", owner="owner")
    telegram = DoubtfulTelegram()
    async with Chief.open(config) as chief, anyio.create_task_group() as tasks:
        rows = [f"row {n}" for n in range(1, 6)]
        for n in (1, 2, 3):  # queued before the sender starts: the first message is a digest
            await chief.report_notify(rows[n - 1], str(n), wait=1.0, queue_telegram=True)
        ringer = Ringer(chief.store, telegram, chat_id="4242")
        await tasks.start(ringer.run)
        with anyio.fail_after(10):
            await telegram.first.wait()
        for n in (4, 5):  # queued while the first send waits for its answer
            await chief.report_notify(rows[n - 1], str(n), wait=1.0, queue_telegram=True)
        telegram.release.set()
        with anyio.fail_after(15):
            while await chief.sent_count() < len(rows):
                ringer.nudge()
                await anyio.sleep(0.02)
        assert ringer.in_doubt_events == 1
        assert (await chief.telegram_status()).in_doubt_events == 1
        ringer.stop()
        await ringer.stopped.wait()
        tasks.cancel_scope.cancel()
    digest = "3 updates\n\nrow 1\n\nrow 2\n\nrow 3"
    assert telegram.sent[:2] == [digest, REPEAT_MARKER + digest]
    assert telegram.sent[2:] in (["2 updates\n\nrow 4\n\nrow 5"], ["row 4", "row 5"])
