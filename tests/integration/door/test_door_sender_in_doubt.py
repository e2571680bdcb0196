"""The real python-telegram-bot sender against a Bot API on loopback that takes sendMessage's
request and hangs up without an answer: Telegram may have rung, so the send is in doubt
(`TelegramUnavailable.in_doubt`), and the door repeats its rows once, marked. A failure before
the request went out (nothing listens; getMe dropped) is a plain failed send, not in doubt."""

from __future__ import annotations

import json

import anyio
import anyio.abc
import pytest

from chief.errors import TelegramUnavailable
from chief.telegram.sender import BotSender, build_sender
from tests.support.procs import free_port

pytestmark = pytest.mark.timeout(30)

TOKEN = "1:in-doubt"
GET_ME = {"id": 1, "is_bot": True, "first_name": "b", "username": "b"}
READ_CHUNK = 65536


async def _read_request(stream: anyio.abc.ByteStream) -> bytes | None:
    """One HTTP/1.1 request's head (its body read and dropped), or None at end of stream."""
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            data += await stream.receive(READ_CHUNK)
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += await stream.receive(READ_CHUNK)
    return head


def _answer(result: object) -> bytes:
    payload = json.dumps({"ok": True, "result": result}).encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(payload)}\r\n\r\n".encode()
        + payload
    )


async def _serve(listener: anyio.abc.SocketListener, hang_up_on: str) -> None:
    """Answer getMe; take a request for `hang_up_on` whole and close the connection."""

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            while (head := await _read_request(stream)) is not None:
                if f"/{hang_up_on} ".encode() in head.split(b"\r\n")[0]:
                    return  # the request arrived; the answer never leaves
                await stream.send(_answer(GET_ME))

    await listener.serve(handle)


async def _send_against(hang_up_on: str) -> TelegramUnavailable:
    port = free_port()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_serve, listener, hang_up_on)
        sender = build_sender(TOKEN, "5", base_url=f"http://127.0.0.1:{port}/bot", timeout_s=2.0)
        assert isinstance(sender, BotSender)
        try:
            with pytest.raises(TelegramUnavailable) as raised:
                await sender.send("todo #1 done")
        finally:
            await sender.aclose()
            tasks.cancel_scope.cancel()
    await listener.aclose()
    return raised.value


async def test_a_send_message_whose_connection_drops_after_the_request_is_in_doubt() -> None:
    failure = await _send_against("sendMessage")
    assert failure.in_doubt is True
    assert "may have rung" in failure.message


async def test_a_dropped_get_me_is_a_plain_failed_send() -> None:
    failure = await _send_against("getMe")
    assert failure.in_doubt is False


async def test_nothing_listening_is_a_plain_failed_send() -> None:
    port = free_port()  # nothing listens there: the connection is refused
    sender = build_sender(TOKEN, "5", base_url=f"http://127.0.0.1:{port}/bot", timeout_s=2.0)
    assert sender is not None
    try:
        with pytest.raises(TelegramUnavailable) as raised:
            await sender.send("todo #1 done")
    finally:
        await sender.aclose()
    assert raised.value.in_doubt is False
