"""The real python-telegram-bot sender against a Bot API that answers sendMessage with
something that is not a Message: a failed send (deferred by the engine), never a crash."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from chief.errors import TelegramUnavailable
from chief.telegram.sender import build_sender
from tests.support.asgi import serve_asgi

TOKEN = "1:unreadable"


async def get_me(request: Request) -> JSONResponse:
    return JSONResponse(
        {"ok": True, "result": {"id": 1, "is_bot": True, "first_name": "b", "username": "b"}}
    )


async def send_message(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "result": {"not": "a message"}})


async def test_an_unreadable_send_answer_is_telegram_unavailable():
    app = Starlette(
        routes=[
            Route(f"/bot{TOKEN}/getMe", get_me, methods=["GET", "POST"]),
            Route(f"/bot{TOKEN}/sendMessage", send_message, methods=["POST"]),
        ]
    )
    async with serve_asgi(app) as base_url:
        sender = build_sender(TOKEN, "5", base_url=base_url + "/bot", timeout_s=2.0)
        assert sender is not None
        await sender.start()
        try:
            with pytest.raises(TelegramUnavailable, match="no readable message"):
                await sender.send("todo #1 done")
        finally:
            await sender.aclose()
