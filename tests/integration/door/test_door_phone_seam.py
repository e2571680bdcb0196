"""The inbound Telegram seam (chief/telegram/inbound.py, `BotPhone`) on the real python-telegram-bot
`Bot` against the Bot API emulator on a real uvicorn: the long poll, a reply with buttons and
a reply-to, a toast, the commands' menu (and the edit the door makes of an ask, which is the
sender's: `BotSender.edit`, removing the buttons; one that changes nothing, or of a message
that is gone, is done); and every failure as the door sees it: another reader (409) is a
TelegramConflict, a bad token a TelegramRefused, a 5xx a TelegramUnavailable, and a cancelled
poll ends at once and frees the poller's place."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import pytest
from telegram import Bot

from chief.errors import TelegramConflict, TelegramRefused, TelegramUnavailable
from chief.telegram.emulator import EmulatorState, create_emulator, parse_fault
from chief.telegram.inbound import BotPhone
from chief.telegram.sender import BotSender, TransportRequest
from tests.support.asgi import serve_asgi
from tests.support.door import BOT_TOKEN
from tests.support.phone import AsyncEmulatorOwner

pytestmark = pytest.mark.timeout(60)

OWNER_ID = 4242
TIMEOUT_S = 5.0


@dataclass
class Seam:
    phone: BotPhone
    owner: AsyncEmulatorOwner
    emulator: EmulatorState
    url: str


@pytest.fixture
async def seam() -> AsyncIterator[Seam]:
    app, state = create_emulator(token=BOT_TOKEN)
    async with serve_asgi(app) as url, AsyncEmulatorOwner(url) as owner:
        phone = BotPhone(BOT_TOKEN, base_url=url + "/bot", timeout_s=TIMEOUT_S)
        try:
            await phone.start()
            yield Seam(phone, owner, state, url)
        finally:
            await phone.aclose()


async def test_the_long_poll_brings_the_owners_text_and_an_offset_confirms_it(seam: Seam) -> None:
    with anyio.fail_after(TIMEOUT_S):
        assert list(await seam.phone.get_updates(None, 0)) == []
    async with anyio.create_task_group() as tasks:
        found: list[object] = []

        async def poll() -> None:
            found.extend(await seam.phone.get_updates(None, 20))

        tasks.start_soon(poll)
        await seam.owner.wait_for(lambda o: seam.emulator.updates.polling, what="a long poll")
        sent = await seam.owner.text(OWNER_ID, OWNER_ID, "/status")
    (update,) = found
    assert update.update_id == sent["update_id"]  # type: ignore[attr-defined]
    assert update.message.text == "/status"  # type: ignore[attr-defined]
    assert list(await seam.phone.get_updates(sent["update_id"] + 1, 0)) == []
    assert await seam.owner.pending_updates() == []


async def test_a_reply_carries_its_buttons_and_its_reply_to_and_the_senders_edit_removes_them(
    seam: Seam,
) -> None:
    asked = await seam.owner.text(OWNER_ID, OWNER_ID, "which bag?")
    buttons = [[("approve", "t-1"), ("decline", "t-2")]]
    message_id = await seam.phone.reply(
        OWNER_ID, "request #7: order the bag?", buttons=buttons, reply_to=asked["message_id"]
    )
    (kept,) = seam.emulator.messages
    assert kept["message_id"] == message_id
    assert kept["reply_to_message_id"] == asked["message_id"]
    rows = kept["reply_markup"]["inline_keyboard"]
    assert [[(b["text"], b["callback_data"]) for b in row] for row in rows] == buttons
    pressed = await seam.owner.press(OWNER_ID, OWNER_ID, message_id, text="approve")
    await seam.phone.answer_callback(pressed["callback_query_id"], "approved")
    assert [a["text"] for a in await seam.owner.callback_answers()] == ["approved"]
    sender = BotSender(BOT_TOKEN, str(OWNER_ID), base_url=seam.url + "/bot", timeout_s=TIMEOUT_S)
    try:
        await sender.edit(OWNER_ID, message_id, "request #7: approved")
        await sender.edit(OWNER_ID, message_id, "request #7: approved")  # no change: done
        (edited,) = seam.emulator.messages
        assert edited["text"] == "request #7: approved"
        assert not (edited.get("reply_markup") or {}).get("inline_keyboard")
        await sender.edit(OWNER_ID, 999, "no such message")  # gone: nothing left to do
        assert [e["text"] for e in edited["edits"]] == ["request #7: order the bag?"]
    finally:
        await sender.aclose()


async def test_the_commands_menu_is_what_was_registered(seam: Seam) -> None:
    await seam.phone.set_commands([("status", "Open items"), ("help", "What I answer to")])
    assert await seam.owner.commands() == [
        {"command": "status", "description": "Open items"},
        {"command": "help", "description": "What I answer to"},
    ]


async def test_another_reader_is_a_conflict(seam: Seam) -> None:
    os.environ.setdefault("PTB_TIMEDELTA", "true")
    other = Bot(
        BOT_TOKEN,
        base_url=seam.url + "/bot",
        request=TransportRequest(seam.url, timeout_s=TIMEOUT_S, pool_size=1),
        get_updates_request=TransportRequest(seam.url, timeout_s=TIMEOUT_S, pool_size=1),
    )
    async with other, anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: other.get_updates(timeout=20))
        await seam.owner.wait_for(lambda o: seam.emulator.updates.polling, what="a long poll")
        with pytest.raises(TelegramConflict, match="another reader"):
            await seam.phone.get_updates(None, 0)
        tasks.cancel_scope.cancel()


async def test_a_bad_token_is_refused_for_good_and_a_5xx_is_only_unavailable(
    seam: Seam,
) -> None:
    wrong = BotPhone("999:wrong", base_url=seam.url + "/bot", timeout_s=TIMEOUT_S)
    try:
        with pytest.raises(TelegramRefused) as refused:
            await wrong.get_updates(None, 0)
        assert refused.value.kind == "bad_token"
        assert "999:wrong" not in str(refused.value)
    finally:
        await wrong.aclose()
    seam.emulator.arm(parse_fault({"mode": "5xx", "methods": ["getUpdates"]}))
    with pytest.raises(TelegramUnavailable) as failed:
        await seam.phone.get_updates(None, 0)
    assert not isinstance(failed.value, (TelegramRefused, TelegramConflict))


async def test_a_cancelled_poll_ends_at_once_and_frees_the_pollers_place(seam: Seam) -> None:
    with anyio.fail_after(2.0):  # far below the poll's 20 s
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: seam.phone.get_updates(None, 20))
            await seam.owner.wait_for(lambda o: seam.emulator.updates.polling, what="a poll")
            tasks.cancel_scope.cancel()
    await seam.owner.wait_for(lambda o: not seam.emulator.updates.polling, what="place freed")
    assert list(await seam.phone.get_updates(None, 0)) == []  # no 409 for the next poll
