"""Telegram's update ids go back, and the phone drops nothing: across real processes (the Bot
API emulator playing the owner, the door `chief serve` long-polling it, `coop serve`).

Telegram's ids are no clock: after a week without updates the next id is chosen at random, and
the emulator counts from 1 again when it restarts (as `ops/run` restarts it). Either way the
door's last update id (and the offset an older door stored in chief.db) is above every new one.
Each way:

    - the owner's /status is answered, and a tap closes its request, in the poll that brings
      them (nothing skipped, nothing confirmed unread);
    - a replayed update (the same id and content) is still applied once;
    - the door says once, in words, that the ids went back.
"""

from __future__ import annotations

import random

import pytest

from chief.phone.commands_text import HELP
from tests.e2e.phone.conftest import OWNER_ID, WAIT_S, PhoneStack
from tests.support.phone import EmulatorOwner

pytestmark = pytest.mark.timeout(120)


def _said(phone: PhoneStack, text: str, starts: str) -> tuple[int, str]:
    """Send `text` as the owner: its update id and the bot's answer (the next message in the
    owner's chat that starts with `starts`), waited for."""
    before = len(phone.owner.messages())
    update_id = int(phone.owner.text(OWNER_ID, OWNER_ID, text)["update_id"])
    answer = phone.owner.wait_for(
        lambda o: [m for m in o.messages()[before:] if str(m["text"]).startswith(starts)],
        WAIT_S,
        f"an answer to {text!r} (update {update_id})",
    )
    return update_id, str(answer[0]["text"])


def _last_update_id(phone: PhoneStack) -> int:
    """The id of the last update made, which the door has handled (its answer came)."""
    return phone.owner.next_update_id() - 1


def _went_back(phone: PhoneStack) -> list[tuple[int, int]]:
    events = phone.stack.door.events("door.phone_ids_went_back")
    return [(e["previous"], e["update_id"]) for e in events]


def _polls(phone: PhoneStack) -> int:
    """The getUpdates calls this emulator process has answered or holds."""
    return int(phone.stack.telegram_calls()["calls"].get("getupdates", 0))


def _tap_closes(phone: PhoneStack, title: str) -> int:
    """File a request to the owner, press approve on its ask: it closes (waited for). The
    update id of the press."""
    request_id = phone.ask(title)
    pressed = phone.press(request_id, "approve")
    row = phone.closed_by_phone(request_id)
    assert (row["closed_by"], row["result_summary"]) == ("owner", "approve")
    phone.wait_answers(request_id, [("applied", "closed")])
    return int(pressed["update_id"])


def _replay_changes_nothing(phone: PhoneStack, update_id: int) -> None:
    """Replay `update_id` (the same id and content); a /help after it is the only answer."""
    before = len(phone.owner.messages())
    phone.owner.replay(update_id)
    phone.owner.wait_for(lambda o: update_id not in o.pending_updates(), WAIT_S, "the replay")
    _said(phone, "/help", "I answer")
    assert [m["text"] for m in phone.owner.messages()[before:]] == [HELP]


def test_the_emulator_restarted_below_the_stored_offset_loses_nothing(
    phone: PhoneStack,
) -> None:
    for _ in range(3):  # the door has handled a few updates: its last id is above 1
        _said(phone, "/help", "I answer")
    last = _last_update_id(phone)
    assert last >= 3
    emulator = phone.stack.emulator
    assert emulator.terminate() == 0  # as ops/run restarts it: its ids count from 1 again
    emulator.start()
    phone.owner.close()
    phone.owner = EmulatorOwner(emulator.url)
    assert phone.owner.next_update_id() == 1
    update_id, status = _said(phone, "/status", "Open:")
    assert (update_id, status.split()[0]) == (1, "Open:")
    # Within one poll: the door's first poll here brought it (the next one waits now).
    assert _polls(phone) <= 2
    assert _tap_closes(phone, "order the bigger bag?") == 2
    assert _went_back(phone) == [(last, 1)]
    _replay_changes_nothing(phone, update_id)


def test_ids_that_jump_down_at_random_lose_nothing(phone: PhoneStack) -> None:
    _said(phone, "/help", "I answer")
    _said(phone, "/help", "I answer")
    last = _last_update_id(phone)
    # The door waits in its long poll (its confirmation of `last` made), as it would through
    # Telegram's week without updates; then the ids jump down by a random amount.
    phone.owner.wait_for(lambda o: o.polling(), WAIT_S, "the door's long poll")
    jumped_to = random.randint(1, last - 1)
    phone.owner.restart_ids(jumped_to)
    went_back, polls = len(_went_back(phone)), _polls(phone)
    update_id, status = _said(phone, "/status", "Open:")
    assert (update_id, status.split()[0]) == (jumped_to, "Open:"), f"from {last} to {jumped_to}"
    assert _polls(phone) <= polls + 1  # the poll that waited brought it
    assert _tap_closes(phone, "paint the shed?") == jumped_to + 1
    assert _went_back(phone)[went_back:] == [(last, jumped_to)]
    _replay_changes_nothing(phone, update_id)
