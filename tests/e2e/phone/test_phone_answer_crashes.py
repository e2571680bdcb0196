"""An answer from the phone survives a crash on its way to the ledger and lands exactly once:
the door killed between the tap's durable record and the ledger (its fault point
`door.answer_recorded`, which dies as SIGKILL does), and `coop serve` killed after the answer's
commit and before its reply (`engine.phone.after_commit`). Each is restarted; the request ends
closed by the owner with the choice, with one close event, one Chief line and one answer row,
and the owner gets one toast."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from plumbing.faults import FAULT_EXIT_STATUS
from tests.e2e.phone.conftest import WAIT_S, PhoneStack

pytestmark = pytest.mark.timeout(120)


def landed_once(phone: PhoneStack, request_id: int, choice: str) -> None:
    # The forwarder's next try comes within its backoff's cap (10 s) of the ledger's return.
    phone.wait_answers(request_id, [("applied", "closed")])
    row = phone.closed_by_phone(request_id)
    assert (row["closed_by"], row["result_summary"]) == ("owner", choice)
    phone.settled_message(request_id)
    phone.wait_chief_line(request_id)
    (close,) = phone.events(request_id, "close")
    assert close["payload"]["via"] == "telegram"
    assert phone.chief_lines(request_id) == 1
    assert len(phone.messages_about(request_id)) == 1  # the ask; nothing rang back


def test_the_door_killed_between_the_record_and_the_ledger_lands_the_answer_once(
    own: Callable[..., PhoneStack],
) -> None:
    phone = own(door_faults="door.answer_recorded")
    request_id = phone.ask("order the bigger bag?")
    phone.ask_message(request_id)
    pressed = phone.press(request_id, "approve")
    door = phone.stack.door
    assert door.wait_exit(WAIT_S) == FAULT_EXIT_STATUS
    # Dead after its record: the ledger has not heard of it, nobody was told.
    assert phone.request(request_id)["status"] == "open"
    assert phone.answers(request_id) == [("pending", "")]
    assert phone.toasts(pressed["callback_query_id"]) == []
    door.start()
    # The update comes again (never recorded as handled) and finds its answer by its key; the
    # forwarder sends what the last run left pending.
    assert "closed with approve" in phone.toast(pressed["callback_query_id"])
    landed_once(phone, request_id, "approve")


def test_coop_serve_killed_after_its_commit_before_its_reply_lands_the_answer_once(
    own: Callable[..., PhoneStack],
) -> None:
    phone = own(engine_faults="engine.phone.after_commit")
    request_id = phone.ask("book the vet?")
    phone.ask_message(request_id)
    pressed = phone.press(request_id, "decline")
    engine = phone.stack.engine
    assert engine.wait_exit(WAIT_S) == FAULT_EXIT_STATUS
    # The ledger committed the close; the door never heard back: the toast says it is saved.
    assert phone.request(request_id)["status"] == "closed"
    assert "will be applied when the ledger answers" in phone.toast(pressed["callback_query_id"])
    assert phone.answers(request_id) == [("pending", "")]
    engine.start()
    # The forwarder's retry, same key: the ledger answers its filed outcome, closes nothing twice.
    landed_once(phone, request_id, "decline")
    assert phone.stack.door.events("answers.engine_unreachable")
