"""A reply's text, as the door takes it (`chief.answer_rules.decide_reply`, issue 26): as `coop`
takes an argument. A NUL is refused with the owner's words; a text past the ledger's limit is
cut to fit, ending in a marker that says how long it was and how much was kept, for any text."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from chief.answer_rules import (
    ANSWER_TEXT_MAX_CHARS,
    NewAnswer,
    Refused,
    cut_note,
    decide_reply,
    fit_reply,
)

KEY = "q-" + "1" * 32
MARKER = re.compile(r"\n\[… cut by the door: (\d+) characters, the first (\d+) kept\]\Z")


def test_a_reply_holding_a_nul_is_refused_and_says_why() -> None:
    decided = decide_reply(None, (7, KEY), "yes\x00please")
    assert isinstance(decided, Refused)
    assert "Request #7" in decided.toast
    assert "NUL" in decided.toast


def test_a_nul_in_a_reply_to_no_ask_is_still_no_answer() -> None:
    assert decide_reply(None, None, "yes\x00please") is None


def test_a_long_reply_is_recorded_cut_and_the_owner_told() -> None:
    text = "z" * 100_000
    decided = decide_reply(None, (7, KEY), text)
    assert isinstance(decided, NewAnswer)
    assert decided.text == fit_reply(text)
    note = cut_note(7, text)
    assert note is not None
    assert "100000 characters" in note


@given(st.text(min_size=1, max_size=3 * ANSWER_TEXT_MAX_CHARS))
def test_fit_reply_keeps_a_text_that_fits_and_marks_one_it_cuts(text: str) -> None:
    fitted = fit_reply(text)
    assert len(fitted) <= ANSWER_TEXT_MAX_CHARS
    if len(text) <= ANSWER_TEXT_MAX_CHARS:
        assert fitted == text
        assert cut_note(1, text) is None
        return
    marker = MARKER.search(fitted)
    assert marker is not None, fitted[-100:]
    total, kept = int(marker.group(1)), int(marker.group(2))
    assert total == len(text)
    assert fitted == text[:kept] + marker.group(0)
    assert f"first {kept}," in str(cut_note(1, text))
