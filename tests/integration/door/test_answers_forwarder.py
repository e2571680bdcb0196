"""The door's answers (chief.door.answers) on a real chief.db, with the two outside parties
played by test doubles at their seams: the ledger's answer route (`AnswerLink`) and Telegram
(`AnswerPhone`). The tap path records first, toasts within its bound, and the forwarder applies
each answer once, retries through an outage logged once, and edits the ask message once.

The same paths across real processes (the emulator, `chief serve`, `coop serve`) are in
tests/e2e/phone/."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import telegram
from structlog.testing import capture_logs

from chief.answer_rules import Button
from chief.door.answers import TAP_WAIT_S, Answers
from chief.errors import ChiefError
from chief.store import ChiefStore
from tests.support.waiting import wait_until

CHAT = 4242
ASK_TEXT = "request #7 from agent: order the bigger bag? (approve / decline)"


def button_of(_conn: sqlite3.Connection, token: str) -> Button | None:
    return {"b-approve": Button(7, "approve", True), "b-decline": Button(7, "decline", True)}.get(
        token
    )


def ask_of(_conn: sqlite3.Connection, chat_id: int, message_id: int) -> int | None:
    return 7 if (chat_id, message_id) == (CHAT, 3) else None


def tap(update_id: int, token: str = "b-approve") -> telegram.Update:  # noqa: S107 (a button)
    user = {"id": CHAT, "is_bot": False, "first_name": "Owner"}
    message = {"message_id": 3, "date": 1_700_000_000, "chat": {"id": CHAT, "type": "private"},
               "text": ASK_TEXT}  # fmt: skip
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
        self, answer_key: str, request_id: int, choice: str | None = None, text: str | None = None
    ) -> dict[str, Any]:
        self.calls += 1
        if self.down:
            raise ChiefError("the ledger service (coop serve) is not running")
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
    edits: list[tuple[int, int, str]] = field(default_factory=list)
    failing_edits: int = 0

    async def answer_callback(self, query_id: str, text: str) -> None:
        self.toasts.append((query_id, text))

    async def edit(
        self, chat_id: int, message_id: int, text: str, *,
        buttons: Sequence[Sequence[tuple[str, str]]] | None = None,
    ) -> None:  # fmt: skip
        if self.failing_edits:
            self.failing_edits -= 1
            raise ChiefError("Telegram did not answer editMessageText; retry later")
        assert buttons is None
        self.edits.append((chat_id, message_id, text))


@asynccontextmanager
async def answers(folder: Path, ledger: Ledger, phone: Phone) -> AsyncIterator[Answers]:
    async with ChiefStore.open(folder / "chief.db") as store, anyio.create_task_group() as tg:
        door = Answers(store, phone, ledger, button_of, ask_of)
        await tg.start(door.run)
        yield door
        tg.cancel_scope.cancel()


async def test_a_tap_is_applied_once_toasted_and_its_message_edited(tmp_path: Path) -> None:
    ledger, phone = Ledger(), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        await door.on_tap(tap(1))
        assert phone.toasts == [("q1", "Done: request #7 closed with approve.")]
        await wait_until(lambda: phone.edits, what="the ask message edited")
        await door.on_tap(tap(1))  # the same update again
        await door.on_tap(tap(2, "b-decline"))  # a double tap
        assert await door.pending() == 0
    assert ledger.closed == {7: "approve"}
    assert ledger.calls == 1
    assert phone.edits == [(CHAT, 3, ASK_TEXT + "\n\n✅ approve (answered from Telegram)")]
    assert "already answered here: approve (closed)" in phone.toasts[-1][1]


async def test_a_slow_ledger_gets_a_saved_toast_within_the_bound(tmp_path: Path) -> None:
    ledger, phone = Ledger(delay_s=TAP_WAIT_S + 0.5), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        began = time.monotonic()
        await door.on_tap(tap(1))
        assert time.monotonic() - began < 1.0
        assert "It will be applied when the ledger answers" in phone.toasts[0][1]
        await wait_until(lambda: phone.edits, what="the answer applied later, and edited")
    assert ledger.closed == {7: "approve"}


async def test_an_outage_is_logged_once_and_the_answer_lands_when_the_ledger_is_back(
    tmp_path: Path,
) -> None:
    ledger, phone = Ledger(down=True), Phone(failing_edits=1)
    with capture_logs() as logs:
        async with answers(tmp_path, ledger, phone) as door:
            await door.on_tap(tap(1))
            assert "Saved: approve for request #7" in phone.toasts[0][1]
            await wait_until(lambda: ledger.calls >= 3, what="three tries", timeout_s=5)
            assert await door.pending() == 1
            ledger.down = False
            await wait_until(lambda: ledger.closed, what="the answer applied", timeout_s=5)
            await wait_until(lambda: phone.edits, what="the edit, tried again", timeout_s=10)
            assert await door.pending() == 0
    events = [entry["event"] for entry in logs]
    assert events.count("answers.engine_unreachable") == 1
    assert events.count("answers.engine_back") == 1
    assert events.count("answers.applied") == 1


async def test_a_restarted_forwarder_sends_what_the_last_one_left_pending(tmp_path: Path) -> None:
    ledger, phone = Ledger(down=True), Phone()
    async with answers(tmp_path, ledger, phone) as door:
        await door.on_tap(tap(1))
    ledger.down = False
    async with answers(tmp_path, ledger, phone):
        await wait_until(lambda: ledger.closed, what="the pending answer sent at the start")
    assert ledger.closed == {7: "approve"}
