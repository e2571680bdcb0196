"""The fallback channel's e2e harness (issue 35, rung 3): a `chief serve` and the Bot API
emulator as real processes (tests.support.stack) with a `mailto://` fallback URL pointing at a
real SMTP server in the test process (tests.support.smtp), the delay compressed through the
test-only CHIEF_TEST_URGENT_SHORT.

    with fallback_stack(folder, CHIEF_FALLBACK_MAX_PER_HOUR="2") as fb:
        fb.block_telegram()                # the owner blocks the bot: every send refused 403
        fb.post("the freezer is warm", urgent=True)
        fb.mail.wait_for(...)              # the mail server's messages
        fb.status()                        # the door status's `fallback` part
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.smtp import Mail, SmtpServer, smtp_server
from tests.support.stack import CHAT_ID, NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER, Stack

AFTER_S = 2.0
WAIT_S = 30.0


class FallbackStack:
    def __init__(self, stack: Stack, mail: SmtpServer) -> None:
        self.stack = stack
        self.mail = mail

    def block_telegram(self) -> None:
        """The owner blocks the bot: every send to their chat refused 403, as Telegram refuses
        a blocked bot, and the `my_chat_member` update saying so (status `kicked`)."""
        self._owner_blocks(True)

    def unblock_telegram(self) -> None:
        """The owner unblocks the bot: sends go through again, and the `my_chat_member` update
        saying the bot is a member again wakes the door's sender."""
        self._owner_blocks(False)

    def _owner_blocks(self, blocked: bool) -> None:
        url = f"{self.stack.emulator.url}/emulator/owner/block"
        body = {"chat_id": int(CHAT_ID), "user_id": int(CHAT_ID), "blocked": blocked}
        with httpx.Client(timeout=WAIT_S, trust_env=False) as client:
            answer = client.post(url, json=body)
        assert answer.status_code == 200, answer.text

    def post(self, text: str, **extras: Any) -> str:
        """A notify row to the door, as the notifier posts one; its outbox id."""
        outbox_id = "d-" + uuid.uuid4().hex
        body = {"text": text, "kind": "notify", "outbox_id": outbox_id, **extras}
        answer = self.stack.door_request(
            "POST", NOTIFY_PATH, json=body, headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        return outbox_id

    def status(self) -> dict[str, Any]:
        return dict(self.stack.door_status()["fallback"])

    def metric(self, name: str, result: str, label: str = "result") -> float:
        answer = self.stack.door_request(
            "GET", "/metrics", headers={SERVICE_KEY_HEADER: SERVICE_KEY}, timeout=WAIT_S
        )
        wanted = f'{name}{{{label}="{result}"}} '
        for line in answer.text.splitlines():
            if line.startswith(wanted):
                return float(line.split()[1])
        raise AssertionError(f"{wanted} not in the door's /metrics")

    def telegram_texts(self) -> list[str]:
        url = f"{self.stack.emulator.url}/emulator/messages"
        with httpx.Client(timeout=WAIT_S, trust_env=False) as client:
            answer = client.get(url)
        assert answer.status_code == 200, answer.text
        return [str(m["text"]) for m in answer.json()["messages"]]

    def mails_about(self, text: str) -> list[Mail]:
        return [m for m in self.mail.messages() if text in m.subject or text in m.body]


def subjects(mails: list[Mail]) -> list[str]:
    return [mail.subject for mail in mails]


@contextmanager
def fallback_stack(folder: Path, **settings: str) -> Iterator[FallbackStack]:
    """The door with its fallback on a fresh SMTP server, for the block."""
    with smtp_server() as mail:
        door_env = {
            "CHIEF_TEST_URGENT_SHORT": "1",
            "CHIEF_URGENT_RERING_S": "1",
            "CHIEF_URGENT_EXPIRE_S": "600",
            "CHIEF_FALLBACK_URLS": mail.mailto_url(),
            "CHIEF_FALLBACK_AFTER_S": str(AFTER_S),
        } | settings
        stack = Stack(folder, door_env=door_env)
        try:
            stack.start_door()
            stack.door.wait_event("door.fallback_configured", "the fallback configured")
            yield FallbackStack(stack, mail)
        finally:
            stack.stop()
            stack.close()
