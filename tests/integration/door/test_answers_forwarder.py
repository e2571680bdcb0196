"""The door's answers (chief.phone.answers) on a real chief.db with a real ask in it (its
tokens and its message, chief.store.asks), and the two outside parties played by test doubles
at their seams: the ledger's answer route (`AnswerLink`) and Telegram's toast (`AnswerPhone`).
The tap path records first, toasts within its bound, and the forwarder applies each answer
once, retries through an outage logged once, and settles the ask once (one edit queued).

The same paths across real processes (the emulator, `chief serve`, `coop serve`) are in
tests/e2e/phone/."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import telegram
from structlog.testing import capture_logs

from chief.errors import EngineUnreachable
from chief.model import Ask
from chief.phone.answers import TAP_WAIT_S, Answers
from chief.store import ChiefStore
from chief.store.answers import asks_button, asks_request
from tests.support.waiting import wait_until

CHAT = 4242
ASK_TEXT = "request #7 from agent: order the bigger bag? (approve / decline)"
ASK = Ask(7, "q-" + "7" * 32, "order the bigger bag?", ("approve", "decline"))
MESSAGE_ID = 3


def tap(update_id: int, token: str) -> telegram.Update:
    user = {"id": CHAT, "is_bot": False, "first_name": "Owner"}
    chat = {"id": CHAT, "type": "private"}
    message = {"message_id": MESSAGE_ID, "date": 1_700_000_000, "chat": chat, "text": ASK_TEXT}
    query = {"id": f"q{update_id}", "from": user, "chat_instance": "c", "data": token,
             "message": message}  # fmt: skip
    update = telegram.Update.de_json({"update_id": update_id, "callback_query": query}, None)
    assert update is not None
    return update


@dataclass
class Ledger:
    """The ledger's answer route as the door sees it: exactly once by answer key, as SPEC's
    `coop_answers` makes it; `down` refuses every call as an unreachable service would."""

    down: bool = False
    delay_s: float = 0.0
    closed: dict[int, str] = field(default_factory=dict)
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: int = 0

    async def answer(
        self,
        answer_key: str,
        request_id: int,
        ask_key: str,
        choice: str | None = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        self.calls += 1
        assert ask_key == ASK.key  # the door names the question it answers
        if self.down:
            raise EngineUnreachable("the ledger service (coop serve) is not running")
        await anyio.sleep(self.delay_s)
        if answer_key in self.seen:
            return self.seen[answer_key]
        if request_id in self.closed:
            reply = {"outcome": "already_closed", "detail": f"request #{request_id} was closed"}
        else:
            self.closed[request_id] = choice or text or ""
            reply = {"outcome": "closed", "detail": "closed"}
        self.seen[answer_key] = reply
        return reply


@dataclass
class Phone:
    toasts: list[tuple[str, str]] = field(default_factory=list)

    async def answer_callback(self, query_id: str, text: str) -> None:
        self.toasts.append((query_id, text))


@dataclass
class Door:
    answers: Answers
    store: ChiefStore
    tokens: dict[str, str]  # label -> token
    nudges: list[int]

    def edits(self) -> list[tuple[int, str]]:
        with closing(sqlite3.connect(self.store.path)) as conn:
            return [(int(a), str(b)) for a, b in conn.execute(
                "SELECT message_id, text FROM ask_edits ORDER BY seq")]  # fmt: skip


async def rung_ask(store: ChiefStore) -> dict[str, str]:
    """Request #7 asked and rung as message 3 (as the door's sender does): its tokens."""
    seq, _ = await store.queue_ask(ASK, ASK_TEXT)
    (entry,) = await store.telegram_head(10)
    await store.mark_rung([seq], [], MESSAGE_ID, CHAT)
    return dict(entry.buttons)


@asynccontextmanager
async def answers(folder: Path, ledger: Ledger, phone: Phone) -> AsyncIterator[Door]:
    async with ChiefStore.open(folder / "chief.db") as store, anyio.create_task_group() as tg:
        tokens = (
            await rung_ask(store) if await store.ask_by_message(CHAT, MESSAGE_ID) is None else {}
        )
        nudges: list[int] = []
        door = Answers(store, phone, ledger, asks_button, asks_request,
                       edits_queued=lambda: nudges.append(1))  # fmt: skip
        await tg.start(door.run)
        yield Door(door, store, tokens, nudges)
        tg.cancel_scope.cancel()


async def test_a_tap_is_applied_once_toasted_and_its_ask_settled(tmp_path: Path) -> None:
    ledger, phone = Ledger(), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        await door.answers.on_tap(tap(1, door.tokens["approve"]))
        assert phone.toasts == [("q1", "Done: request #7 closed with approve.")]
        await door.answers.on_tap(tap(1, door.tokens["approve"]))  # the same update again
        await door.answers.on_tap(tap(2, door.tokens["decline"]))  # a double tap
        assert await door.answers.pending() == 0
        edits = door.edits()
    assert ledger.closed == {7: "approve"}
    assert ledger.calls == 1
    assert edits == [(MESSAGE_ID, ASK_TEXT + "\n\n✅ approve (answered from Telegram)")]
    assert door.nudges == [1]
    assert "already answered here: approve (closed)" in phone.toasts[-1][1]


async def test_a_tap_on_a_void_button_says_how_the_request_was_settled(tmp_path: Path) -> None:
    ledger, phone = Ledger(), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        await door.answers.on_tap(tap(1, door.tokens["approve"]))
        await door.answers.on_tap(tap(2, "b-never-minted"))
    assert ledger.calls == 1
    assert phone.toasts[1] == ("q2", "This request is already settled; nothing was changed.")


async def test_a_slow_ledger_gets_a_saved_toast_within_the_bound(tmp_path: Path) -> None:
    ledger, phone = Ledger(delay_s=TAP_WAIT_S + 0.5), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        began = time.monotonic()
        await door.answers.on_tap(tap(1, door.tokens["approve"]))
        assert time.monotonic() - began < 1.0
        assert "It will be applied when the ledger answers" in phone.toasts[0][1]
        await wait_until(door.edits, what="the answer applied later, and its ask settled")
    assert ledger.closed == {7: "approve"}


async def test_an_outage_is_logged_once_and_the_answer_lands_when_the_ledger_is_back(
    tmp_path: Path,
) -> None:
    ledger, phone = Ledger(down=True), Phone()
    with capture_logs() as logs:
        async with answers(tmp_path, ledger, phone) as door:
            await door.answers.on_tap(tap(1, door.tokens["approve"]))
            assert "Saved: approve for request #7" in phone.toasts[0][1]
            await wait_until(lambda: ledger.calls >= 3, what="three tries", timeout_s=5)
            assert await door.answers.pending() == 1
            ledger.down = False
            await wait_until(door.edits, what="the answer applied", timeout_s=5)
            assert await door.answers.pending() == 0
    events = [entry["event"] for entry in logs]
    assert events.count("answers.engine_unreachable") == 1
    assert events.count("answers.engine_back") == 1
    assert events.count("answers.applied") == 1


async def test_a_restarted_forwarder_sends_what_the_last_one_left_pending(tmp_path: Path) -> None:
    ledger, phone = Ledger(down=True), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        await door.answers.on_tap(tap(1, door.tokens["approve"]))
    ledger.down = False
    async with answers(tmp_path, ledger, phone):
        await wait_until(lambda: ledger.closed, what="the pending answer sent at the start")
    assert ledger.closed == {7: "approve"}
