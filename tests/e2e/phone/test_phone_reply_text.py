"""The owner's free text from the phone is taken as the CLI takes its arguments (issue 26,
"Nothing raw reaches a terminal"): a reply holding a NUL is refused, nothing recorded, and the
owner told why in a reply; a reply longer than the ledger keeps is cut with a marker saying so,
and the owner told. Real processes: the Bot API emulator playing the owner, the door and
`coop serve` (tests/e2e/phone/conftest.py).
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from chief.answer_rules import ANSWER_TEXT_MAX_CHARS
from tests.e2e.phone.conftest import OWNER_ID, WAIT_S, PhoneStack

pytestmark = pytest.mark.timeout(120)

LONG_REPLY_CHARS = 100_000
#: The longest message Telegram delivers (4096 UTF-16 units): past what the ledger keeps.
TELEGRAM_MAX_CHARS = 4096


def told(phone: PhoneStack, request_id: int) -> dict[str, Any]:
    """The door's word to the owner about a reply: a message in reply to the request's ask
    message (waited for, bounded)."""
    message_id = phone.ask_message(request_id)["message_id"]
    return phone.owner.wait_for(
        lambda o: next(
            (
                m
                for m in o.messages()
                if m["chat_id"] == OWNER_ID and m.get("reply_to_message_id") == message_id
            ),
            None,
        ),
        WAIT_S,
        "the door's word to the owner about the reply",
    )


def test_a_reply_holding_a_nul_is_refused_and_the_owner_told_why(phone: PhoneStack) -> None:
    request_id = phone.ask("which day?", choices=None)
    phone.reply(request_id, "tuesday\x00then")
    said = told(phone, request_id)
    assert "NUL" in said["text"], said
    assert phone.answers(request_id) == []
    assert phone.request(request_id)["status"] == "open"


def long_reply(phone: PhoneStack, request_id: int, text: str) -> None:
    """The owner's reply to the request's ask message, as a raw update: Telegram's own limit
    (which the emulator's owner keeps) is 4096 characters, a Bot API server need not keep it."""
    asked = phone.ask_message(request_id)
    owner = {"id": OWNER_ID, "is_bot": False, "first_name": "Owner"}
    chat = {"id": OWNER_ID, "type": "private", "first_name": "Owner"}
    bot = {"id": 1, "is_bot": True, "first_name": "Coop"}
    replied = {"message_id": asked["message_id"], "from": bot, "chat": chat, "date": 1}
    message = {
        "message_id": 900_000 + request_id,
        "from": owner,
        "chat": chat,
        "date": int(time.time()),
        "text": text,
        "reply_to_message": replied | {"text": asked["text"]},
    }
    done = httpx.post(
        phone.stack.emulator.url + "/emulator/owner/raw",
        json={"update": {"message": message}},
        timeout=WAIT_S,
        trust_env=False,
    )
    assert done.status_code == 200, done.text


@pytest.mark.parametrize("length", [TELEGRAM_MAX_CHARS, LONG_REPLY_CHARS])
def test_a_long_reply_is_stored_cut_with_a_marker_and_the_owner_told(
    phone: PhoneStack, length: int
) -> None:
    request_id = phone.ask(f"what did the plumber say? ({length})", choices=None)
    text = "start " + "y" * (length - 10) + " end"
    if length <= TELEGRAM_MAX_CHARS:
        phone.reply(request_id, text)
    else:
        long_reply(phone, request_id, text)
    row = phone.closed_by_phone(request_id)
    summary = str(row["result_summary"])
    assert len(summary) <= ANSWER_TEXT_MAX_CHARS
    assert summary.startswith("start yyy")
    marker = re.search(r"\[… cut by the door: (\d+) characters, the first (\d+) kept\]$", summary)
    assert marker, summary[-200:]
    assert int(marker.group(1)) == len(text)
    assert summary.startswith(text[: int(marker.group(2))])
    said = told(phone, request_id)
    assert f"{len(text)} characters" in said["text"], said
    assert "cut" in said["text"], said
