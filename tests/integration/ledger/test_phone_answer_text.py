"""The owner's text answer is taken as `coop` takes an argument (issue 26): the ledger's answer
route refuses a text holding a NUL in one line, and files nothing (the door refuses it first,
tests/e2e/phone/test_phone_reply_text.py; this is the route's own guard for any other caller).
"""

from __future__ import annotations

import pytest

from engine.errors import UsageError
from tests.integration.ledger.test_phone_answers import answer, ask, events, table


def test_a_text_answer_holding_a_nul_is_refused_and_files_nothing(db: str) -> None:
    request_id = ask(db, choices=None)
    with pytest.raises(UsageError, match="NUL"):
        answer(db, request_id, text="tuesday\x00then")
    assert table(db, "SELECT COUNT(*) FROM coop_answers") == [(0,)]
    assert [event for event, _, _ in events(db, request_id)] == ["add"]
    assert table(db, "SELECT status FROM requests WHERE id = ?", request_id) == [("open",)]
