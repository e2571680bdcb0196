"""The owner unblocking the bot (chief/phone/updater.py): Telegram's `my_chat_member` update in
the owner's own chat, the bot's status back to `member`, wakes the sender (`on_member_again`);
the same update from a stranger, from the second person, or from the owner elsewhere, and the
owner blocking the bot, wake nothing. Telegram is the scripted double of the routing tests;
chief.db is a real file. The whole path, door and emulator as real processes, is
tests/e2e/door/test_door_fallback.py."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from telegram import Update

from tests.unit.phone.test_phone_routing import (
    OWNER_ID,
    STRANGER_ID,
    WAIT_S,
    ScriptedTelegram,
    running_loop,
)

SECOND_ID = 5151
BOT = {"id": 4242424242, "is_bot": True, "first_name": "Coop"}


def member(status: str) -> dict[str, Any]:
    """The bot as a chat member: a `kicked` one (blocked) says until when (0: for ever)."""
    return {"status": status, "user": BOT} | ({"until_date": 0} if status == "kicked" else {})


def member_update(
    update_id: int, old: str, new: str, *, user: int = OWNER_ID, chat: int = OWNER_ID
) -> Update:
    kind = "private" if chat > 0 else "group"
    changed: dict[str, Any] = {
        "chat": {"id": chat, "type": kind},
        "from": {"id": user, "is_bot": False, "first_name": f"u{user}"},
        "date": 1_800_000_000,
        "old_chat_member": member(old),
        "new_chat_member": member(new),
    }
    return Update.de_json({"update_id": update_id, "my_chat_member": changed}, None)


async def woken_by(tmp_path: Any, *updates: Update) -> int:
    """How many times the loop called `on_member_again` for these updates, in one batch."""
    telegram = ScriptedTelegram(list(updates))
    woken: list[int] = []
    async with running_loop(
        tmp_path, telegram, on_member_again=lambda: woken.append(1), second=(SECOND_ID, SECOND_ID)
    ) as (loop, _, _):
        with anyio.fail_after(WAIT_S):
            await telegram.idle.wait()
        assert loop.handled == len(updates)
    return len(woken)


async def test_the_owner_unblocking_the_bot_in_their_chat_wakes_the_sender(tmp_path: Any) -> None:
    assert await woken_by(tmp_path, member_update(30, "kicked", "member")) == 1


@pytest.mark.parametrize(
    ("old", "new", "user", "chat"),
    [
        ("kicked", "member", STRANGER_ID, STRANGER_ID),  # a stranger unblocking in their chat
        ("kicked", "member", STRANGER_ID, OWNER_ID),  # someone else naming the owner's chat
        ("kicked", "member", SECOND_ID, SECOND_ID),  # the second person's chat is not the owner's
        ("kicked", "member", OWNER_ID, -100),  # the owner, in another chat
        ("member", "kicked", OWNER_ID, OWNER_ID),  # the owner blocking the bot
        ("member", "member", OWNER_ID, OWNER_ID),  # nothing changed for the bot
    ],
)
async def test_no_other_member_update_wakes_the_sender(
    tmp_path: Any, old: str, new: str, user: int, chat: int
) -> None:
    assert await woken_by(tmp_path, member_update(31, old, new, user=user, chat=chat)) == 0
