"""The sender task over a real chief.db, with a test double standing in for Telegram (the outside
party): it outlives an unexpected failure of a send, and it keeps the queue's order; a ladder's
ring in the second person's chat does not wait behind the owner's refused chat."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.errors import TelegramRefused, TelegramUnavailable
from chief.phone.pacing import REPEAT_MARKER
from chief.phone.ringer import Ringer
from chief.store import urgent
from chief.urgent_rules import UrgentBounds
from tests.integration.chief.test_urgent_store import filed

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


class BlockedOwner:
    """The owner blocked the bot (403, for good); the second person's chat takes every send."""

    def __init__(self) -> None:
        self.sent: list[tuple[int | str | None, str]] = []
        self.refused = 0
        self.second = anyio.Event()

    async def send(
        self,
        text: str,
        *,
        silent: bool = False,
        buttons: object = None,
        chat: int | str | None = None,
    ) -> int:
        if chat is None:
            self.refused += 1
            raise TelegramRefused.named("bot_blocked", "403 Forbidden", "unblock the bot")
        self.sent.append((chat, text))
        self.second.set()
        return 3000 + len(self.sent)


async def test_rung_two_rings_the_second_chat_while_the_owners_chat_is_refused(
    tmp_path: Path,
) -> None:
    """The ladder's rung 2 is for when the owner cannot be reached: a ring in the second
    person's chat does not wait behind the owner's chat, refused and backing off (issue 35)."""
    config = ChiefConfig(db_path=tmp_path / "chief.db", owner="owner")
    telegram = BlockedOwner()
    async with Chief.open(config) as chief, anyio.create_task_group() as tasks:
        store = chief.store
        await filed(store, "d-9", "URGENT: the freezer is warm")
        ringer = Ringer(store, telegram, chat_id="4242")
        await tasks.start(ringer.run)
        await chief.report_notify("row 1", "1", wait=0.0, queue_telegram=True)
        ringer.nudge()
        with anyio.fail_after(10):
            while not telegram.refused:  # refused: the owner's chat backs off to its cap
                await anyio.sleep(0.02)
        bounds = UrgentBounds(rering_s=60.0, expire_s=3600.0, escalate_s=600.0)
        await store.urgent_write(urgent.ring_due, time.time(), bounds, "5151")
        late = time.time() + bounds.escalate_s + 1
        assert (await store.urgent_write(urgent.ring_due, late, bounds, "5151")).escalated
        ringer.nudge()
        with anyio.fail_after(10):
            await telegram.second.wait()
        ringer.stop()
        await ringer.stopped.wait()
        tasks.cancel_scope.cancel()
    assert telegram.refused >= 1
    [(chat, text)] = telegram.sent
    assert chat == 5151
    assert text.startswith("URGENT, nobody acknowledged it for ")
