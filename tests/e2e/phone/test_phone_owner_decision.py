"""The owner's decision is the record across real processes (issue 34, item 1): the owner taps
`approve` on the phone (the emulator plays the owner, `chief serve` forwards the tap, `coop
serve` closes the request); an agent's `coop request close --force --summary decline` is kept
as a note, the owner's answer untouched, and the Chief told; the owner's own amendment at a
terminal is told to the Chief in one line and edits the decided message on the phone, ringing
nothing new."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from tests.e2e.phone.conftest import WAIT_S, PhoneStack

pytestmark = pytest.mark.timeout(120)


def chief_has(phone: PhoneStack, text: str) -> bool:
    with closing(sqlite3.connect(phone.stack.chief_db)) as conn:
        (count,) = conn.execute(
            "SELECT COUNT(*) FROM messages WHERE content = ?", (text,)
        ).fetchone()
    return bool(count)


def test_an_agent_cannot_replace_the_owners_tap_and_the_owners_amendment_reaches_the_phone(
    phone: PhoneStack,
) -> None:
    request_id = phone.ask("order the bigger bag?")
    message = phone.ask_message(request_id)
    phone.press(request_id, "approve")
    assert phone.closed_by_phone(request_id)["result_summary"] == "approve"
    settled = phone.settled_message(request_id)

    forced = phone.coop(
        "--as", "agent", "request", "close", str(request_id), "--summary", "decline", "--force"
    )
    assert f"request #{request_id} noted: the owner's decision stays the record" in forced
    row = phone.request(request_id)
    assert (row["closed_by"], row["result_summary"]) == ("owner", "approve")
    noted = (
        f'request #{request_id} "order the bigger bag?": agent adds a note to the owner\'s'
        ' decision ("approve"): decline'
    )
    phone.owner.wait_for(lambda _: chief_has(phone, noted), WAIT_S, "the note's Chief line")

    amended = phone.coop(
        "--as", "owner", "request", "close", f"#{request_id}", "--summary", "approve, twice"
    )
    assert amended.startswith(
        f'request #{request_id} amended: summary "approve" → "approve, twice";'
        " the first close stays the record"
    )
    line = (
        f'request #{request_id} "order the bigger bag?" amended by owner:'
        ' summary "approve" → "approve, twice"'
    )
    phone.owner.wait_for(lambda _: chief_has(phone, line), WAIT_S, "the amendment's Chief line")
    edited = phone.owner.wait_for(
        lambda _: next(
            (m for m in phone.messages_about(request_id) if m["text"].endswith("\n" + line)),
            None,
        ),
        WAIT_S,
        "the decided message edited to show the amendment",
    )
    assert edited["message_id"] == message["message_id"]
    assert edited["text"] == settled["text"] + "\n" + line
    assert not edited.get("reply_markup")
    # The amendment rang nothing new: the ask (edited) and the note are all the phone got.
    texts = [m["text"] for m in phone.messages_about(request_id)]
    assert texts == [edited["text"], noted], texts
