"""An ask's deadline and reminders on the phone (issue 28), end to end: a real `chief serve`
against the Bot API emulator, its phone polling; the rows posted to the door's notify route as
the engine sends them (`ask` with `deadline_at`, `default`, `remind`; `settles` with `by:
"deadline"`), the owner played through the emulator. Short intervals through `remind.every_s`.

- three reminders, then none (max 3), each a reply to the ask's first message with its buttons;
- none after a settle, including one queued (Telegram failing) at the moment of the settle;
- held while the owner's /quiet holds, rung once it ends, never silently;
- none twice for one due time across a door SIGKILL while reminders are due;
- the deadline's settle: the buttons go, the edit says the deadline decided it, and a later
  tap on a void button is toasted with what it decided.
"""

from __future__ import annotations

import copy
import sqlite3
import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from chief.telegram.emulator import parse_fault
from chief.telegram.emulator.shapes import message_json, user_json
from tests.e2e.door.conftest import DoorProcess, Harness, spawn_door
from tests.support.phone import EmulatorOwner
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

OWNER_ID = 4242
WAIT_S = 20.0
TITLE = "pay the plumber"
CHOICES = ["approve", "decline"]


def ask_row(**extra: Any) -> dict[str, Any]:
    """A `request_added` row of a request filed to the owner, with a fresh ask key."""
    ask = {"request_id": 5, "key": "q-" + uuid.uuid4().hex, "title": TITLE, "choices": CHOICES}
    return {
        "text": f'request #5 "{TITLE}" filed for the owner',
        "kind": "request.added",
        "outbox_id": "d-" + uuid.uuid4().hex,
        "ask": ask | extra,
    }


def settle_row(asked: dict[str, Any], text: str, **extra: Any) -> dict[str, Any]:
    settles = {"request_id": 5, "key": asked["ask"]["key"]} | extra
    return {
        "text": text,
        "kind": "request.closed",
        "outbox_id": "d-" + uuid.uuid4().hex,
        "settles": settles,
    }


def bot_messages(harness: Harness) -> list[dict[str, Any]]:
    return [m for m in harness.emulator.messages if str(m["chat_id"]) == str(OWNER_ID)]


def reminders(harness: Harness) -> list[dict[str, Any]]:
    """The reminders the bot sent, as each rang (copies: the emulator edits in place)."""
    return copy.deepcopy(
        [m for m in bot_messages(harness) if "Reminder" in m["text"].split(":")[0]]
    )


def ask_message(harness: Harness, row: dict[str, Any]) -> dict[str, Any]:
    """The ask's first message as it rang (a copy: the emulator edits its own in place)."""
    return copy.deepcopy(
        wait_until_sync(
            lambda: next(
                (m for m in bot_messages(harness) if m["text"].startswith(row["text"])), None
            ),
            timeout_s=WAIT_S,
            what="the ask rung",
        )
    )


def schedule(harness: Harness, ask_key: str) -> tuple[int, float | None, str | None]:
    """(rung, next_at, end_reason) of the ask's reminders in chief.db."""
    with sqlite3.connect(harness.folder / "chief.db") as conn:
        row = conn.execute(
            "SELECT rung, next_at, end_reason FROM ask_reminders WHERE ask_key = ?", (ask_key,)
        ).fetchone()
    assert row is not None, "no reminders scheduled"
    return int(row[0]), row[1], row[2]


def queued_reminders(harness: Harness, ask_key: str) -> list[tuple[int, int]]:
    """(seq, attempts) of the ask's reminders still on the Telegram queue."""
    with sqlite3.connect(harness.folder / "chief.db") as conn:
        return conn.execute(
            "SELECT seq, attempts FROM telegram_queue WHERE ask_key = ? "
            "AND reply_to_message_id IS NOT NULL",
            (ask_key,),
        ).fetchall()


def started(harness: Harness) -> DoorProcess:
    door = spawn_door(harness.env())
    door.wait_event("door.phone_commands_registered", "the door's phone polling")
    return door


def post(harness: Harness, door: DoorProcess, row: dict[str, Any]) -> None:
    answer = harness.notify(door, row)
    assert answer.status_code == 200, answer.text


def test_three_reminders_then_none(harness: Harness) -> None:
    door = started(harness)
    row = ask_row(remind={"every_s": 1, "max": 3})
    post(harness, door, row)
    asked = ask_message(harness, row)
    key = row["ask"]["key"]
    wait_until_sync(
        lambda: schedule(harness, key)[1] is None, timeout_s=WAIT_S, what="the schedule ended"
    )
    wait_until_sync(lambda: len(reminders(harness)) >= 3, timeout_s=WAIT_S, what="3 reminders")
    rung = reminders(harness)
    assert [m["text"].split(":")[0] for m in rung] == [f"Reminder {n} of 3" for n in (1, 2, 3)]
    for message in rung:
        assert f'request #5 "{TITLE}" has waited' in message["text"]
        assert message["reply_to_message_id"] == asked["message_id"]
        assert message["reply_markup"] == asked["reply_markup"]  # the same live buttons
        assert message["disable_notification"] is False
    assert schedule(harness, key) == (3, None, "rung all")
    wait_until_sync(
        lambda: queued_reminders(harness, key) == [], timeout_s=WAIT_S, what="the last one marked"
    )
    assert harness.status(door)["reminders"] == {"scheduled": 0, "next": None}
    assert len(reminders(harness)) == 3


def answers_of(harness: Harness, ask_key: str) -> list[tuple[str, int]]:
    with sqlite3.connect(harness.folder / "chief.db") as conn:
        return conn.execute(
            "SELECT choice, message_id FROM telegram_answers WHERE ask_key = ?", (ask_key,)
        ).fetchall()


def test_a_tap_on_a_reminder_decides_the_ask_once_and_the_settle_edits_every_message(
    harness: Harness,
) -> None:
    door = started(harness)
    row = ask_row(remind={"every_s": 1, "max": 1})
    key = row["ask"]["key"]
    post(harness, door, row)
    asked = ask_message(harness, row)
    reminder = wait_until_sync(lambda: reminders(harness), timeout_s=WAIT_S, what="a reminder")[0]
    wait_until_sync(
        lambda: queued_reminders(harness, key) == [], timeout_s=WAIT_S, what="its mark written"
    )
    with EmulatorOwner(harness.emulator_url) as owner:
        owner.press(OWNER_ID, OWNER_ID, reminder["message_id"], text="approve")
        wait_until_sync(lambda: answers_of(harness, key), timeout_s=WAIT_S, what="the answer")
        again = owner.press(OWNER_ID, OWNER_ID, asked["message_id"], text="decline")
        toast = wait_until_sync(
            lambda: next(
                (
                    a
                    for a in owner.callback_answers()
                    if a["callback_query_id"] == again["callback_query_id"]
                ),
                None,
            ),
            timeout_s=WAIT_S,
            what="the second tap toasted",
        )
    assert answers_of(harness, key) == [("approve", reminder["message_id"])]  # one decision
    assert "already answered here: approve" in toast["text"]
    post(harness, door, settle_row(row, 'request #5 "pay the plumber" closed: approve'))
    wait_until_sync(
        lambda: all(
            harness.emulator.find(OWNER_ID, m["message_id"])["reply_markup"] is None
            for m in (asked, reminder)
        ),
        timeout_s=WAIT_S,
        what="both messages edited, their buttons gone",
    )
    for message in (asked, reminder):
        edited = harness.emulator.find(OWNER_ID, message["message_id"])
        assert (
            edited["text"] == message["text"] + '\n\nrequest #5 "pay the plumber" closed: approve'
        )


def test_no_reminder_after_a_settle_even_one_queued_at_the_settle(harness: Harness) -> None:
    door = started(harness)
    row = ask_row(remind={"every_s": 1, "max": 3})
    key = row["ask"]["key"]
    post(harness, door, row)
    ask_message(harness, row)
    harness.emulator.arm(parse_fault({"mode": "5xx", "count": 1000, "methods": ["sendMessage"]}))
    wait_until_sync(
        lambda: any(attempts >= 1 for _, attempts in queued_reminders(harness, key)),
        timeout_s=WAIT_S,
        what="a reminder queued, its send failed",
    )
    post(harness, door, settle_row(row, 'request #5 "pay the plumber" closed: approve'))
    assert queued_reminders(harness, key) == []  # dropped in the settle's transaction
    assert schedule(harness, key)[1:] == (None, "settled")
    harness.emulator.faults.clear()
    wait_until_sync(
        lambda: any(m["text"].endswith("closed: approve") for m in bot_messages(harness)),
        timeout_s=WAIT_S,
        what="the settle's edit made",
    )
    wait_until_sync(
        lambda: harness.status(door)["telegram_queue"]["depth"] == 0,
        timeout_s=WAIT_S,
        what="the queue drained",
    )
    assert reminders(harness) == []


def test_reminders_wait_for_the_owners_quiet_then_ring_aloud(harness: Harness) -> None:
    door = started(harness)
    owner = EmulatorOwner(harness.emulator_url)
    try:
        owner.text(OWNER_ID, OWNER_ID, "/quiet 1h")
        wait_until_sync(
            lambda: any(m["text"].startswith("Quiet for") for m in bot_messages(harness)),
            timeout_s=WAIT_S,
            what="/quiet answered",
        )
        row = ask_row(remind={"every_s": 1, "max": 3})
        post(harness, door, row)
        assert ask_message(harness, row)["disable_notification"] is True
        held = wait_until_sync(
            lambda: (
                (n := harness.status(door)["reminders"]["next"]) is not None
                and n["due_at"] > time.time() + 3000
                and n
            ),
            timeout_s=WAIT_S,
            what="the first reminder held until /quiet ends",
        )
        assert held["ask_key"] == row["ask"]["key"]
        assert reminders(harness) == []
        owner.text(OWNER_ID, OWNER_ID, "/quiet off")
        first = wait_until_sync(
            lambda: reminders(harness), timeout_s=WAIT_S, what="the reminder rung after /quiet"
        )[0]
    finally:
        owner.close()
    assert first["text"].startswith("Reminder 1 of 3")
    assert first["disable_notification"] is False


def test_no_reminder_twice_for_one_due_time_across_a_door_sigkill(harness: Harness) -> None:
    door = started(harness)
    row = ask_row(remind={"every_s": 1, "max": 3})
    key = row["ask"]["key"]
    post(harness, door, row)
    ask_message(harness, row)
    wait_until_sync(lambda: reminders(harness), timeout_s=WAIT_S, what="the first reminder")
    door.kill()
    due_at = schedule(harness, key)[1]
    assert due_at is not None
    wait_until_sync(lambda: time.time() > due_at + 0.5, timeout_s=WAIT_S, what="one falls due")
    door = started(harness)
    wait_until_sync(
        lambda: schedule(harness, key)[1] is None and not queued_reminders(harness, key),
        timeout_s=WAIT_S,
        what="the reminders rung after the restart",
    )
    texts = [m["text"] for m in reminders(harness)]
    for number in (1, 2, 3):
        assert sum(t.startswith(f"Reminder {number} of 3") for t in texts) == 1, texts
    doubts = int(harness.status(door)["telegram_queue"]["in_doubt_events"])
    assert sum(t.startswith("(possible repeat) Reminder") for t in texts) <= doubts


def late_tap(harness: Harness, message: dict[str, Any], token: str) -> str:
    """A tap on `message`'s button `token` as the owner's phone shows it before the edit
    lands (a raw callback query: the emulator's owner presses only live buttons); its id."""
    query_id = "late-" + uuid.uuid4().hex[:8]
    query = {
        "id": query_id,
        "from": user_json(OWNER_ID, None, "Owner"),
        "chat_instance": f"ci{OWNER_ID}",
        "message": message_json(message) | {"reply_markup": message["edits"][0]["reply_markup"]},
        "data": token,
    }
    done = harness.client.post(
        harness.emulator_url + "/emulator/owner/raw", json={"update": {"callback_query": query}}
    )
    assert done.status_code == 200, done.text
    return query_id


def local_clock(at: float) -> str:
    when, today = datetime.fromtimestamp(at).astimezone(), datetime.now().astimezone()
    return when.strftime("%H:%M" if when.date() == today.date() else "%a %H:%M")


def test_the_deadline_shown_its_settle_edits_and_a_late_tap_is_told(harness: Harness) -> None:
    door = started(harness)
    deadline_at = time.time() + 600
    row = ask_row(deadline_at=deadline_at, default="decline")
    post(harness, door, row)
    asked = ask_message(harness, row)
    assert asked["text"].endswith(f"\nif no answer by {local_clock(deadline_at)}: decline")
    words = f'request #5 "{TITLE}": no answer by its deadline (18:00), so closed with: decline'
    settle = settle_row(row, words, by="deadline", outcome="closed", choice="decline")
    post(harness, door, settle)
    edited = wait_until_sync(
        lambda: (
            (m := harness.emulator.find(OWNER_ID, asked["message_id"]))
            and m["reply_markup"] is None
            and m
        ),
        timeout_s=WAIT_S,
        what="the ask edited, its buttons gone",
    )
    assert edited["text"] == asked["text"] + "\n\n" + words
    token = asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    query_id = late_tap(harness, edited, token)
    toast = wait_until_sync(
        lambda: next(
            (a for a in harness.emulator.callback_answers if a["callback_query_id"] == query_id),
            None,
        ),
        timeout_s=WAIT_S,
        what="the late tap toasted",
    )
    assert toast["text"].startswith(f"The deadline decided this at {local_clock(deadline_at)}: ")
    assert "decline" in toast["text"]
    assert harness.status(door)["answers_pending"] == 0


def test_a_deadline_without_a_default_abandons_and_says_so(harness: Harness) -> None:
    door = started(harness)
    deadline_at = time.time() + 600
    row = ask_row(deadline_at=deadline_at)
    post(harness, door, row)
    asked = ask_message(harness, row)
    assert asked["text"].endswith(f"\nif no answer by {local_clock(deadline_at)}: abandoned")
    words = f'request #5 "{TITLE}": no answer by its deadline (18:00), so abandoned'
    post(harness, door, settle_row(row, words, by="deadline", outcome="abandoned"))
    edited = wait_until_sync(
        lambda: (
            (m := harness.emulator.find(OWNER_ID, asked["message_id"]))
            and m["reply_markup"] is None
            and m
        ),
        timeout_s=WAIT_S,
        what="the ask edited",
    )
    token = asked["reply_markup"]["inline_keyboard"][0][1]["callback_data"]
    query_id = late_tap(harness, edited, token)
    toast = wait_until_sync(
        lambda: next(
            (a for a in harness.emulator.callback_answers if a["callback_query_id"] == query_id),
            None,
        ),
        timeout_s=WAIT_S,
        what="the late tap toasted",
    )
    assert toast["text"].startswith("The deadline decided this at ")
    assert ": abandoned" in toast["text"]
