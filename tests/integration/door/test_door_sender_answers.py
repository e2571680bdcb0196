"""The real python-telegram-bot sender against a Bot API that answers sendMessage `ok: true`
with something that is not a Message: Telegram took it, so the send is done (never sent
again), its message id unknown and logged once; never a crash. Every other shape, for every
method: tests/fuzz/test_telegram_replies_fuzz.py."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from structlog.testing import capture_logs

from chief.telegram.sender import build_sender
from tests.support.asgi import serve_asgi

TOKEN = "1:unreadable"


async def get_me(request: Request) -> JSONResponse:
    return JSONResponse(
        {"ok": True, "result": {"id": 1, "is_bot": True, "first_name": "b", "username": "b"}}
    )


async def send_message(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, "result": {"not": "a message"}})


async def test_an_accepted_send_whose_message_cannot_be_read_is_sent_its_id_unknown():
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
            with capture_logs() as logs:
                assert await sender.send("todo #1 done") is None
        finally:
            await sender.aclose()
    said = [entry for entry in logs if entry["event"] == "telegram.message_id_unreadable"]
    assert len(said) == 1, logs
