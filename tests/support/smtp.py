"""A real SMTP server on a loopback ephemeral port, for the fallback channel's `mailto://` URLs:
aiosmtpd's SMTP protocol (its public `aiosmtpd.smtp.SMTP`) on an asyncio loop in a thread of
the test process, over a socket the test binds itself (port 0: no free-port guess to race).

    with smtp_server() as mail:
        url = mail.mailto_url()           # mailto://...?smtp=127.0.0.1&port=N&mode=insecure
        mail.wait_for(lambda m: ..., timeout_s, what)
        mail.messages()                   # every message received, parsed (subject, body)

No TLS and no login: Apprise's `mode=insecure` speaks plain SMTP, which is what a loopback test
server takes.
"""

from __future__ import annotations

import asyncio
import email
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from typing import Any, TypeVar

from aiosmtpd.smtp import SMTP, Envelope, Session

from tests.support.waiting import wait_until_sync

T = TypeVar("T")
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Mail:
    subject: str
    body: str
    to: list[str]


def _text_of(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                return payload.decode(part.get_content_charset() or "utf-8").replace("\r\n", "\n")
    return ""


class _Handler:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[Mail] = []

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw)
        subject = str(email.header.make_header(email.header.decode_header(parsed["Subject"] or "")))
        mail = Mail(subject, _text_of(parsed), [str(to) for to in envelope.rcpt_tos])
        with self.lock:
            self.received.append(mail)
        return "250 OK"


class SmtpServer:
    """The running server: its port, and what it received."""

    def __init__(self, port: int, handler: _Handler) -> None:
        self.port = port
        self._handler = handler

    def mailto_url(self, to: str = "owner@example.org") -> str:
        return (
            f"mailto://coop@localhost?smtp=127.0.0.1&port={self.port}&mode=insecure"
            f"&to={to}&from=coop@localhost"
        )

    def messages(self) -> list[Mail]:
        with self._handler.lock:
            return list(self._handler.received)

    def wait_for(self, condition: Callable[[list[Mail]], T], timeout_s: float, what: str) -> T:
        return wait_until_sync(lambda: condition(self.messages()), timeout_s=timeout_s, what=what)


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    """Serve SMTP on 127.0.0.1 (an ephemeral port) for the block."""
    handler = _Handler()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="smtp-server", daemon=True)
    thread.start()
    server: Any = None
    try:

        async def start() -> Any:
            return await loop.create_server(lambda: SMTP(handler), sock=sock)

        server = asyncio.run_coroutine_threadsafe(start(), loop).result(START_TIMEOUT_S)
        yield SmtpServer(int(sock.getsockname()[1]), handler)
    finally:
        if server is not None:

            async def stop() -> None:
                server.close()
                await server.wait_closed()

            asyncio.run_coroutine_threadsafe(stop(), loop).result(START_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(START_TIMEOUT_S)
        loop.close()
        sock.close()
