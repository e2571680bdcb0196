"""The emulator's fault control switches Telegram from one failure to another in one step
(`"replace": true`), so a test that moves from 5xx to 429 leaves no moment in which a send
succeeds. Before, a test had to reset the emulator and then arm the next fault: a send landing
between the two calls was kept, and a "Telegram fails every send" proof saw a message."""

from __future__ import annotations

import httpx
import pytest

from chief.errors import TelegramUnavailable
from chief.telegram.emulator import create_emulator
from chief.telegram.sender import BotSender
from tests.support.asgi import serve_asgi
from tests.support.door import BOT_TOKEN, CHAT_ID

pytestmark = pytest.mark.timeout(60)


async def test_replace_forgets_the_armed_faults_and_arms_the_new_one_in_one_step() -> None:
    app, state = create_emulator(token=BOT_TOKEN)
    async with serve_asgi(app, lifespan="on") as url:
        async with httpx.AsyncClient(base_url=url, trust_env=False) as client:
            first = await client.post(
                "/emulator/faults", json={"mode": "5xx", "count": 10_000, "status": 502}
            )
            assert first.status_code == 200, first.text
            second = await client.post(
                "/emulator/faults",
                json={"mode": "429", "count": 10_000, "retry_after": 1, "replace": True},
            )
            assert second.status_code == 200, second.text
            armed = (await client.get("/emulator/faults")).json()["faults"]
            assert [fault["mode"] for fault in armed] == ["429"]

            bad = await client.post("/emulator/faults", json={"mode": "5xx", "replace": "yes"})
            assert bad.status_code == 400
            assert "replace must be true or false" in bad.text

        sender = BotSender(BOT_TOKEN, CHAT_ID, base_url=url + "/bot", timeout_s=5.0)
        await sender.start()
        try:
            with pytest.raises(TelegramUnavailable):
                await sender.send("held back by the 429")
        finally:
            await sender.aclose()
    assert state.messages == []
    assert state.calls["sendmessage"] >= 1
