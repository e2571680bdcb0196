"""The Bot API emulator's two-way half, driven by the real python-telegram-bot `telegram.Bot` on a
real uvicorn over loopback: the owner's texts and presses (played through the control
endpoints) reach `get_updates` as PTB reads them, long polling wakes at once and is bounded by
its timeout, an offset confirms, a second poller is refused 409, and every method refuses what
the Bot API refuses, in its words."""

from __future__ import annotations

import datetime as dtm
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import pytest
from telegram import Bot, BotCommand, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.error import BadRequest, Conflict

from chief.telegram.emulator import BOT_USER, EmulatorState, create_emulator
from chief.telegram.sender import TransportRequest
from tests.support.asgi import serve_asgi
from tests.support.door import BOT_TOKEN
from tests.support.phone import AsyncEmulatorOwner

pytestmark = pytest.mark.timeout(60)

OWNER_ID = 4242
STRANGER_ID = 777
GROUP_ID = -100500


@dataclass
class Phone:
    bot: Bot
    owner: AsyncEmulatorOwner
    url: str
    emulator: EmulatorState


def _bot(url: str) -> Bot:
    os.environ.setdefault("PTB_TIMEDELTA", "true")  # as the door's sender opts in
    return Bot(
        BOT_TOKEN,
        base_url=url + "/bot",
        request=TransportRequest(url, timeout_s=5.0, pool_size=4),
        get_updates_request=TransportRequest(url, timeout_s=5.0, pool_size=2),
    )


@pytest.fixture
async def phone() -> AsyncIterator[Phone]:
    app, state = create_emulator(token=BOT_TOKEN)
    async with serve_asgi(app) as url, AsyncEmulatorOwner(url) as owner:
        bot = _bot(url)
        async with bot:
            yield Phone(bot, owner, url, state)


def keyboard(*labels: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(label, callback_data=f"tok-{label}") for label in labels]]
    )


async def test_an_owner_text_reaches_get_updates_as_ptb_reads_it(phone: Phone) -> None:
    sent = await phone.owner.text(OWNER_ID, OWNER_ID, "/start 123456", username="owner")
    (update,) = await phone.bot.get_updates(timeout=dtm.timedelta(seconds=1))
    assert update.update_id == sent["update_id"]
    message = update.message
    assert message is not None
    assert message.message_id == sent["message_id"]
    assert message.chat.id == OWNER_ID
    assert message.chat.type == "private"
    assert message.from_user is not None
    assert (message.from_user.id, message.from_user.username) == (OWNER_ID, "owner")
    assert message.text == "/start 123456"
    assert message.parse_entities(["bot_command"]) == {message.entities[0]: "/start"}
    assert message.date is not None

    group = await phone.owner.text(GROUP_ID, STRANGER_ID, "hello")
    updates = await phone.bot.get_updates(offset=sent["update_id"] + 1)
    assert [u.update_id for u in updates] == [group["update_id"]]
    assert updates[0].effective_chat is not None
    assert updates[0].effective_chat.type == "group"
    assert updates[0].message is not None
    assert updates[0].message.entities == ()


async def test_message_ids_are_counted_per_chat(phone: Phone) -> None:
    first = await phone.bot.send_message(OWNER_ID, "one")
    other = await phone.bot.send_message(GROUP_ID, "elsewhere")
    mine = await phone.owner.text(OWNER_ID, OWNER_ID, "two")
    third = await phone.bot.send_message(OWNER_ID, "three")
    assert (first.message_id, mine["message_id"], third.message_id) == (1, 2, 3)
    assert other.message_id == 1


async def test_long_poll_wakes_when_an_update_arrives_and_is_bounded_by_its_timeout(
    phone: Phone,
) -> None:
    started = anyio.current_time()
    assert await phone.bot.get_updates(timeout=dtm.timedelta(seconds=1)) == ()
    assert anyio.current_time() - started >= 0.9  # held until the timeout passed

    got: list[int] = []

    async def poll() -> None:
        updates = await phone.bot.get_updates(timeout=dtm.timedelta(seconds=30))
        got.extend(u.update_id for u in updates)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(poll)
        await _until_polling(phone)
        started = anyio.current_time()
        sent = await phone.owner.text(OWNER_ID, OWNER_ID, "wake up")
    assert got == [sent["update_id"]]
    assert anyio.current_time() - started < 5  # woken by the update, not by the 30 s timeout


async def _until_polling(phone: Phone) -> None:
    """Wait (bounded) until the emulator holds a long poll open (its own state says so)."""
    await phone.owner.wait_for(lambda _: phone.emulator.updates.polling, what="a long poll")


async def test_an_offset_confirms_and_a_replay_delivers_the_same_update_again(
    phone: Phone,
) -> None:
    first = await phone.owner.text(OWNER_ID, OWNER_ID, "first")
    second = await phone.owner.text(OWNER_ID, OWNER_ID, "second")
    again = await phone.bot.get_updates()
    assert [u.update_id for u in again] == [first["update_id"], second["update_id"]]
    assert [u.update_id for u in await phone.bot.get_updates()] == [
        first["update_id"],
        second["update_id"],
    ]  # not confirmed yet: delivered again
    assert [u.update_id for u in await phone.bot.get_updates(offset=second["update_id"])] == [
        second["update_id"]
    ]
    assert await phone.bot.get_updates(offset=second["update_id"] + 1) == ()
    assert await phone.owner.pending_updates() == []

    await phone.owner.replay(first["update_id"])
    (replayed,) = await phone.bot.get_updates(offset=second["update_id"] + 1)
    assert replayed.to_dict() == again[0].to_dict()  # the same object, delivered again
    assert await phone.bot.get_updates(offset=first["update_id"] + 1) == ()
    refused = await phone.owner.replay(999_999, expect=400)
    assert "no update 999999" in refused["description"]


async def test_ids_start_again_lower_and_an_offset_confirms_what_waits_below_it(
    phone: Phone,
) -> None:
    # Telegram's ids are no clock (a random one after a week without updates; a restarted
    # emulator counts from 1), and an offset confirms every update below it, delivered or not.
    for text in ("one", "two", "three"):
        await phone.owner.text(OWNER_ID, OWNER_ID, text)
    assert await phone.bot.get_updates(offset=4) == ()  # confirmed unread
    assert await phone.owner.restart_ids(2) == {"next_update_id": 2, "was": 4}
    low = await phone.owner.text(OWNER_ID, OWNER_ID, "after the jump")
    assert low["update_id"] == 2
    assert await phone.bot.get_updates(offset=4) == ()  # a floor above it drops it
    low = await phone.owner.text(OWNER_ID, OWNER_ID, "again")
    (update,) = await phone.bot.get_updates()  # no offset: the earliest unconfirmed
    assert (update.update_id, update.message.text) == (3, "again")  # type: ignore[union-attr]
    refused = await phone.owner.restart_ids(0, expect=400)
    assert "positive" in refused["description"]


async def test_a_second_poller_is_refused_409_while_one_polls(phone: Phone) -> None:
    second = _bot(phone.url)
    async with second, anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: phone.bot.get_updates(timeout=dtm.timedelta(seconds=30)))
        await _until_polling(phone)
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await second.get_updates(timeout=dtm.timedelta(seconds=1))
        await phone.owner.text(OWNER_ID, OWNER_ID, "ends the first poll")


async def test_a_poller_that_hangs_up_leaves_its_place(phone: Phone) -> None:
    with anyio.move_on_after(0.5):
        await phone.bot.get_updates(timeout=dtm.timedelta(seconds=30))
    # the first poll was cancelled on our side: the emulator sees the hang-up and a new
    # poll is served, not refused 409
    with anyio.fail_after(5):
        while True:
            try:
                assert await phone.bot.get_updates(timeout=dtm.timedelta(seconds=0)) == ()
                break
            except Conflict:
                await anyio.sleep(0.02)


async def test_a_press_is_a_callback_query_and_its_answer_is_kept(phone: Phone) -> None:
    asked = await phone.bot.send_message(
        OWNER_ID, "order the bigger bag?", reply_markup=keyboard("approve", "decline")
    )
    assert asked.reply_markup == keyboard("approve", "decline")
    (kept,) = await phone.owner.messages()
    assert kept["reply_markup"]["inline_keyboard"][0][1]["callback_data"] == "tok-decline"

    pressed = await phone.owner.press(OWNER_ID, OWNER_ID, asked.message_id, text="decline")
    assert pressed["data"] == "tok-decline"
    (update,) = await phone.bot.get_updates()
    query = update.callback_query
    assert query is not None
    assert (query.id, query.data) == (pressed["callback_query_id"], "tok-decline")
    assert query.from_user.id == OWNER_ID
    assert query.chat_instance
    assert query.message is not None
    assert query.message.message_id == asked.message_id
    assert query.message.chat.id == OWNER_ID

    assert await phone.bot.answer_callback_query(query.id, text="declined") is True
    with pytest.raises(BadRequest, match=r"[Qq]uery is too old"):
        await phone.bot.answer_callback_query(query.id, text="twice")
    with pytest.raises(BadRequest, match=r"[Qq]uery is too old"):
        await phone.bot.answer_callback_query("no-such-query")
    (answer,) = await phone.owner.callback_answers()
    assert (answer["callback_query_id"], answer["text"], answer["show_alert"]) == (
        query.id,
        "declined",
        False,
    )
    by_index = await phone.owner.press(OWNER_ID, STRANGER_ID, asked.message_id, index=0)
    assert by_index["data"] == "tok-approve"
    with pytest.raises(BadRequest, match="Message_too_long"):
        await phone.bot.answer_callback_query(by_index["callback_query_id"], text="x" * 201)


async def test_press_refuses_what_the_message_does_not_have(phone: Phone) -> None:
    plain = await phone.bot.send_message(OWNER_ID, "no buttons")
    asked = await phone.bot.send_message(OWNER_ID, "ask", reply_markup=keyboard("yes"))
    for body, reason in [
        ({"message_id": plain.message_id}, "no inline buttons"),
        ({"message_id": asked.message_id, "text": "no"}, "no button 'no'"),
        ({"message_id": asked.message_id, "index": 3}, "index must be 0..0"),
        ({"message_id": 99}, "no bot message 99"),
    ]:
        refused = await phone.owner.press(
            OWNER_ID,
            OWNER_ID,
            body.pop("message_id"),  # type: ignore[arg-type]
            expect=400,
            **body,  # type: ignore[arg-type]
        )
        assert reason in refused["description"]


async def test_a_press_without_message_id_takes_the_newest_message_with_that_button(
    phone: Phone,
) -> None:
    older = await phone.bot.send_message(OWNER_ID, "first", reply_markup=keyboard("approve"))
    newer = await phone.bot.send_message(OWNER_ID, "second", reply_markup=keyboard("approve", "no"))
    await phone.bot.send_message(OWNER_ID, "plain, the newest")
    await phone.bot.send_message(STRANGER_ID, "elsewhere", reply_markup=keyboard("approve", "x"))
    await phone.bot.edit_message_reply_markup(OWNER_ID, newer.message_id)  # its buttons gone

    for body, expected in [
        ({"text": "approve"}, older.message_id),  # the newer one has no button now
        ({}, older.message_id),
        ({"index": 0}, older.message_id),
    ]:
        pressed = await phone.owner.press(OWNER_ID, OWNER_ID, **body)  # type: ignore[arg-type]
        (update,) = await phone.bot.get_updates(offset=pressed["update_id"])
        assert update.callback_query is not None
        assert update.callback_query.message is not None
        assert update.callback_query.message.message_id == expected, body
    await phone.bot.send_message(OWNER_ID, "third", reply_markup=keyboard("approve", "no"))
    assert (await phone.owner.press(OWNER_ID, OWNER_ID, text="no"))["data"] == "tok-no"

    for body, reason in [
        ({"text": "maybe"}, "chat 4242 has no bot message with a button 'maybe'"),
        ({"index": 2}, "chat 4242 has no bot message with a button at index 2"),
        ({"text": "no", "index": 0}, "give text or index, not both"),
    ]:
        refused = await phone.owner.press(
            OWNER_ID,
            OWNER_ID,
            expect=400,
            **body,  # type: ignore[arg-type]
        )
        assert refused["description"] == reason
    refused = await phone.owner.press(GROUP_ID, OWNER_ID, expect=400)
    assert refused["description"] == "chat -100500 has no bot message with a button"


async def test_edits_change_the_message_and_refuse_as_the_bot_api_does(phone: Phone) -> None:
    asked = await phone.bot.send_message(OWNER_ID, "ask", reply_markup=keyboard("yes", "no"))
    edited = await phone.bot.edit_message_text(
        "ask: yes (by owner)", chat_id=OWNER_ID, message_id=asked.message_id
    )
    assert not isinstance(edited, bool)
    assert edited.text == "ask: yes (by owner)"
    assert edited.reply_markup is None  # an edit without reply_markup removes the keyboard
    (kept,) = await phone.owner.messages()
    assert kept["text"] == "ask: yes (by owner)"
    assert kept["reply_markup"] is None
    assert [edit["text"] for edit in kept["edits"]] == ["ask"]
    assert kept["edits"][0]["reply_markup"]["inline_keyboard"][0][0]["text"] == "yes"
    refused = await phone.owner.press(OWNER_ID, OWNER_ID, asked.message_id, expect=400)
    assert "no inline buttons" in refused["description"]

    with pytest.raises(BadRequest, match=r"[Mm]essage is not modified"):
        await phone.bot.edit_message_text(
            "ask: yes (by owner)", chat_id=OWNER_ID, message_id=asked.message_id
        )
    with pytest.raises(BadRequest, match=r"[Mm]essage to edit not found"):
        await phone.bot.edit_message_text("x", chat_id=OWNER_ID, message_id=999)
    with pytest.raises(BadRequest, match=r"[Mm]essage to edit not found"):
        await phone.bot.edit_message_text("x", chat_id=GROUP_ID, message_id=asked.message_id)

    again = await phone.bot.edit_message_reply_markup(
        chat_id=OWNER_ID, message_id=asked.message_id, reply_markup=keyboard("undo")
    )
    assert not isinstance(again, bool)
    assert again.reply_markup == keyboard("undo")
    await phone.bot.edit_message_reply_markup(chat_id=OWNER_ID, message_id=asked.message_id)
    with pytest.raises(BadRequest, match=r"[Mm]essage is not modified"):
        await phone.bot.edit_message_reply_markup(chat_id=OWNER_ID, message_id=asked.message_id)
    with pytest.raises(BadRequest, match=r"[Mm]essage to edit not found"):
        await phone.bot.edit_message_reply_markup(chat_id=OWNER_ID, message_id=998)
    mine = await phone.owner.text(OWNER_ID, OWNER_ID, "not the bot's")
    with pytest.raises(BadRequest, match="can't be edited"):
        await phone.bot.edit_message_text("x", chat_id=OWNER_ID, message_id=mine["message_id"])


async def test_callback_data_must_be_1_to_64_bytes(phone: Phone) -> None:
    longest = "é" * 32  # 64 bytes in UTF-8
    ok = await phone.bot.send_message(
        OWNER_ID,
        "fits",
        reply_markup=InlineKeyboardMarkup([[InlineKeyboardButton("a", callback_data=longest)]]),
    )
    assert ok.reply_markup is not None
    for data in ["x" * 65, "é" * 33, ""]:
        with pytest.raises(BadRequest, match="Button_data_invalid"):
            await phone.bot.send_message(
                OWNER_ID,
                "too long",
                reply_markup=InlineKeyboardMarkup(
                    [[InlineKeyboardButton("a", callback_data=data)]]
                ),
            )
    assert [m["text"] for m in await phone.owner.messages()] == ["fits"]


async def test_a_reply_keeps_what_it_answers_both_ways(phone: Phone) -> None:
    asked = await phone.bot.send_message(OWNER_ID, "how many bags?")
    answer = await phone.owner.text(OWNER_ID, OWNER_ID, "two", reply_to_message_id=asked.message_id)
    (update,) = await phone.bot.get_updates()
    assert update.message is not None
    assert update.message.reply_to_message is not None
    assert update.message.reply_to_message.message_id == asked.message_id
    assert update.message.reply_to_message.from_user is not None
    assert update.message.reply_to_message.from_user.id == BOT_USER["id"]

    noted = await phone.bot.send_message(
        OWNER_ID, "noted", reply_parameters=ReplyParameters(answer["message_id"])
    )
    assert noted.reply_to_message is not None
    assert noted.reply_to_message.text == "two"
    assert (await phone.owner.messages())[-1]["reply_to_message_id"] == answer["message_id"]
    with pytest.raises(BadRequest, match=r"[Mm]essage to be replied not found"):
        await phone.bot.send_message(OWNER_ID, "x", reply_to_message_id=555)
    refused = await phone.owner.text(OWNER_ID, OWNER_ID, "x", reply_to_message_id=555, expect=400)
    assert "no message 555" in refused["description"]


async def test_set_my_commands_is_checked_and_kept(phone: Phone) -> None:
    commands = [BotCommand("status", "open items and delivery health"), BotCommand("help", "?")]
    assert await phone.bot.set_my_commands(commands) is True
    assert await phone.bot.get_my_commands() == tuple(commands)
    assert await phone.owner.commands() == [
        {"command": "status", "description": "open items and delivery health"},
        {"command": "help", "description": "?"},
    ]
    for wrong, words in [
        ([BotCommand("Status", "upper case")], "Bot_command_invalid"),
        ([BotCommand("x" * 33, "too long")], "Bot_command_invalid"),
        ([BotCommand("quiet", "d" * 257)], "Bot_command_description_invalid"),
        ([BotCommand(f"c{i}", "d") for i in range(101)], "Bot_commands_too_much"),
        ([], "non-empty"),
    ]:
        with pytest.raises(BadRequest, match=words):
            await phone.bot.set_my_commands(wrong)
    assert len(await phone.owner.commands()) == 2  # a refused list changes nothing


async def test_allowed_updates_filters_and_reset_forgets(phone: Phone) -> None:
    asked = await phone.bot.send_message(OWNER_ID, "ask", reply_markup=keyboard("yes"))
    await phone.owner.text(OWNER_ID, OWNER_ID, "a text")
    pressed = await phone.owner.press(OWNER_ID, OWNER_ID, asked.message_id)
    (only,) = await phone.bot.get_updates(allowed_updates=["callback_query"])
    assert only.update_id == pressed["update_id"]

    await phone.owner.reset()
    assert await phone.owner.messages() == []
    assert await phone.owner.pending_updates() == []
    assert await phone.owner.callback_answers() == []
    later = await phone.owner.text(OWNER_ID, OWNER_ID, "after the reset")
    assert later["update_id"] > pressed["update_id"]  # ids keep counting, as Telegram's do
