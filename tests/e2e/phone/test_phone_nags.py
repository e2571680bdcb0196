"""The phone that keeps asking, through every part as an agent and the owner use it (issue 28):
`coop` processes file the requests and reports, `coop serve` applies the deadlines and carries
the rows, the door rings them (reminders, urgent repeats) and the Bot API emulator plays the
owner. The parts' own tests post rows to the door or read the ledger alone; these hold the
joins: the flags reach the phone as the door reads them, and what the phone does reaches the
ledger and the Chief. One stack for the module, its urgent interval compressed through the
test-only CHIEF_TEST_URGENT_SHORT."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from tests.e2e.phone.conftest import OWNER_ID, WAIT_S, PhoneStack
from tests.support.phone import EmulatorOwner
from tests.support.phone_stack import make_stack, start
from tests.support.procs import coop

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

RERING_S = "1"


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoneStack]:
    stack = make_stack(tmp_path_factory.mktemp("nags"))
    stack.door.env.update(
        CHIEF_TEST_URGENT_SHORT="1", CHIEF_URGENT_RERING_S=RERING_S, CHIEF_URGENT_EXPIRE_S="60"
    )
    try:
        start(stack)
        started = PhoneStack(stack, EmulatorOwner(stack.emulator.url))
        yield started
        started.owner.close()
        assert set(stack.stop().values()) == {0}
    finally:
        stack.close()


def _filed(said: str) -> int:
    return int(said.split("#", 1)[1].split()[0])


def _replies_to(phone: PhoneStack, message_id: int) -> list[dict[str, Any]]:
    return [m for m in phone.owner.messages() if m.get("reply_to_message_id") == message_id]


def _buttons(message: dict[str, Any]) -> list[str]:
    rows = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return [button["text"] for row in rows for button in row]


def _chief_lines(phone: PhoneStack, pattern: str) -> list[str]:
    with closing(sqlite3.connect(phone.stack.chief_db)) as conn:
        rows = conn.execute("SELECT content FROM messages WHERE content LIKE ?", (pattern,))
        return [str(content) for (content,) in rows.fetchall()]


def test_a_deadline_with_reminders_rings_them_then_decides_once_and_settles_every_message(
    phone: PhoneStack,
) -> None:
    said = phone.coop(
        "request", "add", "pay the plumber", "--to", "owner", "--choices", "approve,decline",
        "--deadline", "4s", "--default", "decline", "--remind", "1s",
        COOP_REMIND_MAX="2",
    )  # fmt: skip
    request_id = _filed(said)
    waited: list[Any] = []
    waiter = threading.Thread(
        target=lambda: waited.append(
            coop("request", "wait", str(request_id), "--timeout", "30", env=phone.stack.env())
        )
    )
    waiter.start()
    ask = phone.ask_message(request_id)
    assert "if no answer by " in ask["text"]
    assert ask["text"].endswith(": decline")
    assert _buttons(ask) == ["approve", "decline"]
    reminders = phone.owner.wait_for(
        lambda _: (found := _replies_to(phone, ask["message_id"])) and len(found) == 2 and found,
        WAIT_S,
        "two reminders, each a reply to the ask",
    )
    assert all(m["text"].startswith("Reminder") for m in reminders)
    assert all(_buttons(m) == ["approve", "decline"] for m in reminders)
    waiter.join(WAIT_S * 2)
    (done,) = waited
    assert done.returncode == 0, done.stderr
    assert "deadline" in done.stdout
    row = phone.request(request_id)
    assert (row["status"], row["closed_by"], row["result_summary"]) == (
        "closed",
        "deadline",
        "decline",
    )
    (close,) = phone.events(request_id, "close")
    assert close["payload"]["via"] == "deadline"
    # Every message that rang the ask is edited to say so, its buttons gone.
    for message_id in [ask["message_id"], *(m["message_id"] for m in reminders)]:
        phone.owner.wait_for(
            lambda _, mid=message_id: any(
                m["message_id"] == mid and m["edits"] and not _buttons(m)
                for m in phone.owner.messages()
            ),
            WAIT_S,
            f"message {message_id} settled",
        )
    # (A tap that beats the edit is told what the deadline decided: tests/e2e/door/.)
    assert len(phone.events(request_id, "close")) == 1
    assert len(_replies_to(phone, ask["message_id"])) == 2  # none after the settle


def test_an_urgent_report_rings_through_quiet_until_got_it_and_lands_its_acknowledgement(
    phone: PhoneStack,
) -> None:
    phone.owner.text(OWNER_ID, OWNER_ID, "/quiet 2h")
    phone.owner.wait_for(
        lambda o: any("quiet" in str(m["text"]).lower() for m in o.messages()),
        WAIT_S,
        "the door's answer to /quiet",
    )
    phone.coop("notify", "--urgent", "the freezer is warm")

    def rings() -> list[dict[str, Any]]:
        return [
            m
            for m in phone.owner.messages()
            if str(m["text"]).startswith("URGENT") and "the freezer is warm" in m["text"]
        ]

    first, repeat = phone.owner.wait_for(
        lambda _: found[:2] if len(found := rings()) >= 2 else None,
        WAIT_S,
        "the urgent report and its first repeat",
    )
    assert not first["disable_notification"]
    assert not repeat["disable_notification"]
    assert repeat["text"].startswith("URGENT, again")
    newest = phone.owner.wait_for(
        lambda _: next((m for m in reversed(rings()) if _buttons(m) == ["Got it"]), None),
        WAIT_S,
        "the newest ring with its live Got it",
    )
    tap = phone.owner.press(OWNER_ID, OWNER_ID, int(newest["message_id"]), text="Got it")
    assert phone.toast(tap["callback_query_id"]).startswith("Acknowledged")
    phone.owner.wait_for(
        lambda _: _chief_lines(phone, "acknowledged at %the freezer is warm%"),
        WAIT_S,
        "the acknowledgement's Chief line",
    )
    assert len(_chief_lines(phone, "acknowledged at %the freezer is warm%")) == 1
    assert len(_chief_lines(phone, "URGENT: the freezer is warm%")) == 1
    phone.owner.wait_for(
        lambda _: phone.stack.door_status()["urgent"]["ringing"] == [],
        WAIT_S,
        "nothing urgent left ringing",
    )
    phone.owner.text(OWNER_ID, OWNER_ID, "/quiet off")


def test_an_urgent_request_stops_ringing_when_the_owner_answers_it(phone: PhoneStack) -> None:
    said = phone.coop(
        "request", "add", "the front door is open: lock it?", "--to", "owner",
        "--choices", "lock,leave", "--urgent",
    )  # fmt: skip
    request_id = _filed(said)
    ask = phone.owner.wait_for(
        lambda o: next(
            (m for m in o.messages() if f"request #{request_id} " in str(m["text"])), None
        ),
        WAIT_S,
        "the urgent request's ask",
    )
    assert str(ask["text"]).startswith("URGENT")
    assert _buttons(ask) == ["lock", "leave", "Got it"]
    pressed = phone.owner.press(OWNER_ID, OWNER_ID, int(ask["message_id"]), text="lock")
    assert "closed with lock" in phone.toast(pressed["callback_query_id"])
    row = phone.closed_by_phone(request_id)
    assert (row["closed_by"], row["result_summary"]) == ("owner", "lock")
    phone.owner.wait_for(
        lambda _: phone.stack.door_status()["urgent"]["ringing"] == [],
        WAIT_S,
        "the urgent request no longer ringing",
    )
    assert len(phone.events(request_id, "close")) == 1
