"""The pure rules of an answer from the phone (chief.answer_rules): what a tap or a reply
becomes, and what the owner reads in the toast and the settled ask message."""

from __future__ import annotations

from dataclasses import replace

import pytest

from chief.answer_rules import (
    TOAST_MAX_CHARS,
    Answer,
    Button,
    NewAnswer,
    Refused,
    Seen,
    backoff_s,
    decide_reply,
    decide_tap,
    settled_line,
    state_for,
    toast_for,
)

KEY = "q-" + "7" * 32
LIVE = Button(request_id=7, ask_key=KEY, choice="approve", live=True)


def answer(**fields: object) -> Answer:
    base = Answer(
        answer_key="a-" + "0" * 32,
        update_id=10,
        request_id=7,
        ask_key=KEY,
        choice="approve",
        text=None,
        chat_id=42,
        message_id=3,
        ask_text="request #7 from agent: order the bigger bag? (approve / decline)",
        callback_query_id="q1",
        state="pending",
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_a_tap_on_a_live_button_of_an_unanswered_request_is_a_new_answer() -> None:
    assert decide_tap(None, LIVE, None) == NewAnswer(7, KEY, choice="approve")


def test_the_same_update_again_finds_its_answer_and_records_nothing() -> None:
    earlier = answer()
    assert decide_tap(earlier, LIVE, None) == Seen(earlier)
    assert decide_reply(earlier, (7, KEY), "yes") == Seen(earlier)


@pytest.mark.parametrize(
    ("state", "outcome", "says"),
    [
        ("pending", None, "saved, waiting for the ledger"),
        ("applied", "closed", "closed"),
    ],
)
def test_a_double_tap_records_nothing_and_says_what_was_answered(
    state: str, outcome: str | None, says: str
) -> None:
    earlier = answer(state=state, outcome=outcome)
    decision = decide_tap(None, replace(LIVE, choice="decline"), earlier)
    assert isinstance(decision, Refused)
    assert "already answered here: approve" in decision.toast
    assert says in decision.toast


def test_a_void_button_says_the_request_is_settled_and_how_when_known() -> None:
    void = Button(7, KEY, "approve", live=False, settled="by owner at a terminal: decline")
    decision = decide_tap(None, void, None)
    assert decision == Refused(
        "Request #7 is already settled (by owner at a terminal: decline); nothing was changed."
    )
    assert decide_tap(None, replace(void, settled=None), None) == Refused(
        "Request #7 is already settled; nothing was changed."
    )


def test_an_unknown_token_changes_nothing_and_says_settled() -> None:
    decision = decide_tap(None, None, None)
    assert isinstance(decision, Refused)
    assert "already settled" in decision.toast


def test_a_reply_to_an_ask_message_is_a_text_answer_and_to_anything_else_none() -> None:
    assert decide_reply(None, (7, KEY), "the big one") == NewAnswer(7, KEY, text="the big one")
    assert decide_reply(None, None, "hello") is None
    assert decide_reply(None, (7, KEY), "   ") is None


def test_a_refused_tap_or_a_noted_text_decides_nothing_a_closing_text_does() -> None:
    assert answer().deciding
    assert not answer(state="refused", outcome="already_closed").deciding
    text = answer(choice=None, text="fine")
    assert not replace(text, state="applied", outcome="noted").deciding
    assert replace(text, state="applied", outcome="closed").deciding


@pytest.mark.parametrize(
    ("outcome", "state"),
    [("closed", "applied"), ("noted", "applied"), ("already_closed", "refused"),
     ("not_a_choice", "refused"), ("unknown_request", "refused"),
     ("not_this_request", "refused")],
)  # fmt: skip
def test_each_outcome_settles_the_answer(outcome: str, state: str) -> None:
    assert state_for(outcome) == state


def test_the_toast_says_saved_until_the_ledger_answers_then_its_outcome() -> None:
    assert "will be applied when the ledger answers" in toast_for(answer())
    closed = answer(state="applied", outcome="closed")
    assert toast_for(closed) == "Done: request #7 closed with approve."
    detail = "request #7 was already closed by owner at a terminal: decline"
    refused = answer(state="refused", outcome="already_closed", detail=detail)
    assert toast_for(refused) == detail
    assert len(toast_for(refused.__class__(**{**refused.__dict__, "detail": "x" * 500}))) == (
        TOAST_MAX_CHARS
    )


def test_the_settled_message_gains_the_outcome_and_a_note_or_a_wrong_choice_none() -> None:
    closed = answer(state="applied", outcome="closed")
    assert settled_line(closed) == "✅ approve (answered from Telegram)"
    refused = answer(state="refused", outcome="already_closed", detail="closed at a terminal")
    assert (settled_line(refused) or "").endswith("closed at a terminal")
    assert settled_line(answer(choice=None, text="hm", state="applied", outcome="noted")) is None
    assert settled_line(answer(state="refused", outcome="not_a_choice")) is None


def test_an_answer_to_a_question_no_longer_in_the_ledger_says_so_and_settles_its_message() -> None:
    detail = (
        "This question is no longer in the ledger (request #7 is another request now); nothing"
        " was changed."
    )
    gone = answer(state="refused", outcome="not_this_request", detail=detail)
    assert toast_for(gone) == detail
    assert settled_line(gone) == f"ℹ️ {detail}"
    assert not gone.deciding


def test_the_forwarders_backoff_doubles_and_is_bounded() -> None:
    waits = [backoff_s(n) for n in range(1, 12)]
    assert waits[0] == 0.2
    assert waits == sorted(waits)
    assert max(waits) == 10.0
