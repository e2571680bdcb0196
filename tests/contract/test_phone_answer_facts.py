"""The facts the door's answers and the ledger's answer route must agree on, pinned equal (the
packages share no code): the route's path, the shape of an answer key, the outcomes the ledger
answers, and how long a text answer may be."""

from __future__ import annotations

import re

from chief import answer_rules
from chief.door import answers as door_answers
from chief.door import engine_link
from engine import lifecycle
from engine.owner import phone as engine_phone
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
