"""The facts the door's answers and the ledger's answer route must agree on, pinned equal (the
packages share no code): the route's path, the shape of an answer key and of an ask key, the
fields of an answer, the outcomes the ledger answers (with `not_this_request`: the ask key does
not match), and how long a text answer may be."""

from __future__ import annotations

import re

from chief import answer_rules, model
from chief.door import router as door_router
from chief.phone import answers as door_answers
from chief.phone import engine_link
from engine import lifecycle
from engine.owner import phone as engine_phone
from engine.store import ledger as ledger_store
from engine.verbs import phone as engine_phone_verbs


def test_the_door_posts_answers_where_the_ledger_serves_them() -> None:
    assert engine_link.ANSWER_PATH == engine_phone.ANSWER_PATH == "/api/coop/phone/answer"


def test_every_key_the_door_draws_is_one_the_ledger_accepts() -> None:
    for _ in range(200):
        key = door_answers.new_answer_key()
        assert re.fullmatch(engine_phone.ANSWER_KEY_PATTERN, key), key
        assert answer_rules.ANSWER_KEY_RE.fullmatch(key), key


def test_the_door_knows_every_outcome_the_ledger_answers() -> None:
    assert frozenset(engine_phone_verbs.OUTCOMES) == answer_rules.OUTCOMES


def test_a_text_answer_is_cut_to_what_the_ledger_takes() -> None:
    assert answer_rules.ANSWER_TEXT_MAX_CHARS == lifecycle.MAX_ANSWER_CHARS


def test_the_door_knows_the_outcome_of_an_answer_to_another_request() -> None:
    assert engine_phone_verbs.NOT_THIS_REQUEST == "not_this_request"
    assert "not_this_request" in answer_rules.REFUSED_OUTCOMES
    assert "not_this_request" in answer_rules.SETTLING_OUTCOMES  # its message is settled


def test_every_ask_key_the_ledger_draws_is_one_the_door_and_the_answer_route_accept() -> None:
    assert engine_phone.ASK_KEY_PATTERN == model.ASK_KEY_PATTERN
    for _ in range(200):
        key = ledger_store.new_ask_key()
        assert re.fullmatch(model.ASK_KEY_PATTERN, key), key
        door_router.AskBody.model_validate({"request_id": 1, "key": key, "title": "t"})
        door_router.SettlesBody.model_validate({"request_id": 1, "key": key})


def test_the_body_the_door_sends_is_the_body_the_ledger_takes() -> None:
    """The door's answer body names the request id AND its ask key; the ledger's model
    requires both (an answer without an ask key is refused, never applied by id alone)."""
    body = {
        "answer_key": door_answers.new_answer_key(),
        "request_id": 7,
        "ask_key": ledger_store.new_ask_key(),
    }
    assert set(engine_phone.AnswerBody.model_fields) == {*body, "choice", "text"}
    engine_phone.AnswerBody.model_validate(body | {"choice": "approve"})
    without = {k: v for k, v in body.items() if k != "ask_key"}
    try:
        engine_phone.AnswerBody.model_validate(without | {"choice": "approve"})
    except ValueError:
        pass
    else:
        raise AssertionError("an answer without its ask key was accepted")
