"""The Bot API emulator answers a group upgraded to a supergroup and a webhook the way the Bot API
does (tdlib/telegram-bot-api's Client.cpp: `fail_query(400, "Bad Request: group chat was upgraded
to a supergroup chat", {"migrate_to_chat_id": ...})` for a write to the deactivated group, and
`fail_query_conflict("Conflict: can't use getUpdates method while webhook is active; use
deleteWebhook to delete the webhook first")`), read both raw and by the real
python-telegram-bot (`ChatMigrated.new_chat_id`, `Conflict`), over a real uvicorn."""

from __future__ import annotations

import datetime as dtm
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from structlog.testing import capture_logs
from telegram import Bot
from telegram.error import ChatMigrated, Conflict

from chief.telegram.emulator import EmulatorState, create_emulator
from chief.telegram.sender import BotSender, TransportRequest
from tests.support.asgi import serve_asgi
from tests.support.door import BOT_TOKEN

pytestmark = pytest.mark.timeout(60)

GROUP_ID = -5020240850
SUPERGROUP_ID = -1005020240850
UPGRADED = "Bad Request: group chat was upgraded to a supergroup chat"
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)


@dataclass
class Api:
    bot: Bot
    url: str
    emulator: EmulatorState
    client: httpx.AsyncClient

    async def call(self, method: str, **params: object) -> httpx.Response:
        return await self.client.post(f"{self.url}/bot{BOT_TOKEN}/{method}", json=params)


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    app, state = create_emulator(token=BOT_TOKEN)
    os.environ.setdefault("PTB_TIMEDELTA", "true")  # as the door's sender opts in
    async with serve_asgi(app) as url, httpx.AsyncClient(trust_env=False, timeout=10) as client:
        bot = Bot(
            BOT_TOKEN,
            base_url=url + "/bot",
            request=TransportRequest(url, timeout_s=5.0, pool_size=2),
            get_updates_request=TransportRequest(url, timeout_s=5.0, pool_size=2),
        )
        async with bot:
            yield Api(bot, url, state, client)


async def test_a_write_to_an_upgraded_group_answers_migrate_to_chat_id(api: Api) -> None:
    await api.bot.send_message(GROUP_ID, "before the upgrade")
    moved = await api.client.post(f"{api.url}/emulator/chats/migrate", json={"chat_id": GROUP_ID})
    assert moved.json() == {"ok": True, "chat_id": GROUP_ID, "to_chat_id": SUPERGROUP_ID}
    answer = await api.call("sendMessage", chat_id=GROUP_ID, text="after")
    assert answer.status_code == 400
    assert answer.json() == {
        "ok": False,
        "error_code": 400,
        "description": UPGRADED,
        "parameters": {"migrate_to_chat_id": SUPERGROUP_ID},
    }
    with pytest.raises(ChatMigrated) as migrated:
        await api.bot.send_message(GROUP_ID, "after, through PTB")
    assert migrated.value.new_chat_id == SUPERGROUP_ID
    # An edit of the group's old message is a write to the group: refused the same way.
    with pytest.raises(ChatMigrated):
        await api.bot.edit_message_text("edited", chat_id=GROUP_ID, message_id=1)
    # The supergroup takes messages as any chat; nothing refused was kept.
    await api.bot.send_message(SUPERGROUP_ID, "in the supergroup")
    assert [(m["chat_id"], m["text"]) for m in api.emulator.messages] == [
        (GROUP_ID, "before the upgrade"),
        (SUPERGROUP_ID, "in the supergroup"),
    ]


@pytest.mark.parametrize("chat_id", [4242, 0])
async def test_only_a_group_can_become_a_supergroup(api: Api, chat_id: int) -> None:
    refused = await api.client.post(f"{api.url}/emulator/chats/migrate", json={"chat_id": chat_id})
    assert refused.status_code == 400
    assert "only a group" in refused.json()["description"]


async def test_get_updates_is_refused_while_a_webhook_is_set_until_delete_webhook(api: Api) -> None:
    assert (await api.call("setWebhook", url="https://example.invalid/hook")).json()["ok"]
    info = (await api.call("getWebhookInfo")).json()["result"]
    assert info["url"] == "https://example.invalid/hook"
    answer = await api.call("getUpdates")
    assert answer.status_code == 409
    assert answer.json() == {"ok": False, "error_code": 409, "description": WEBHOOK_CONFLICT}
    with pytest.raises(Conflict, match="use deleteWebhook"):
        await api.bot.get_updates(timeout=dtm.timedelta(seconds=0))
    assert (await api.call("deleteWebhook")).json() == {"ok": True, "result": True}
    assert await api.bot.get_updates(timeout=dtm.timedelta(seconds=0)) == ()


async def test_the_senders_edit_of_a_message_left_in_the_old_group_is_moot(api: Api) -> None:
    """A settle's edit of an ask that rang in the group before it moved: Telegram refuses it
    with `migrate_to_chat_id`, and the supergroup never had it: nothing left to do, no retry."""
    sender = BotSender(BOT_TOKEN, str(GROUP_ID), base_url=api.url + "/bot", timeout_s=5.0)
    await sender.start()
    try:
        message_id = await sender.send("may I?")
        assert message_id is not None
        api.emulator.migrate(GROUP_ID)
        with capture_logs() as logs:
            await sender.edit(GROUP_ID, message_id, "may I? approved")
        assert [entry["event"] for entry in logs] == ["telegram.edit_moot"]
        assert sender.moved is None  # an edit follows nothing: only a send rings the chat
    finally:
        await sender.aclose()
