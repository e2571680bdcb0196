"""`chief.telegram.inbound.read_updates`: getUpdates' answer read update by update, so one update
python-telegram-bot cannot read is passed over under its own id instead of failing every poll
(found by tests/fuzz/test_phone_updates_fuzz.py: the door's poll never got past it)."""

from __future__ import annotations

from typing import Any

import pytest
from telegram import Bot

from chief.telegram.inbound import read_updates

BOT = Bot("123456:unit-token")
OWNER = {"id": 4242, "is_bot": False, "first_name": "Ann"}
GOOD = {
    "update_id": 7,
    "message": {
        "message_id": 1,
        "date": 1,
        "chat": {"id": 4242, "type": "private"},
        "from": OWNER,
        "text": "/help",
    },
}


def test_readable_updates_are_read_as_ptb_reads_them() -> None:
    (update,) = read_updates([GOOD], BOT)
    assert update.update_id == 7
    assert update.message is not None
    assert update.message.text == "/help"


@pytest.mark.parametrize(
    "misshapen",
    [{"message": {"message_id": 1}}, {"message": 5}, {"callback_query": [1]}],
    ids=["no-chat", "a-number", "a-list"],
)
def test_an_update_ptb_cannot_read_becomes_an_empty_one_under_its_id(
    misshapen: dict[str, Any],
) -> None:
    first, second = read_updates([{"update_id": 8, **misshapen}, GOOD], BOT)
    assert (first.update_id, first.effective_user, first.effective_chat) == (8, None, None)
    assert second.message is not None


@pytest.mark.parametrize("result", [{"ok": True}, [{"message": {}}], [{"update_id": "8"}], [5]])
def test_an_answer_that_is_not_a_list_of_updates_with_ids_is_refused(result: object) -> None:
    with pytest.raises(ValueError, match="getUpdates answered"):
        read_updates(result, BOT)
