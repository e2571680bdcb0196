"""The pure rules of an ask: what a choice may be, how its buttons are laid out, and which
entries the next Telegram message carries when an ask is among them (always alone)."""

from __future__ import annotations

import pytest

from chief.errors import ChiefInputError
from chief.model import Ask, choice_refusal, choices_refusal
from chief.phone.asks import ask_of, ask_text
from chief.phone.pacing import REPEAT_MARKER, keyboard_rows
from chief.phone.ringer import ask_buttons, chat_key, next_message
from chief.store import QueuedRing


def entry(seq: int, ask: int | None = None, repeat: str | None = None) -> QueuedRing:
    buttons = () if ask is None else (("yes", f"b-{seq}"), ("no", f"b-{seq}n"))
    return QueuedRing(seq, str(seq), f"row {seq}", 0, 0.0, repeat, ask, buttons)


@pytest.mark.parametrize(
    ("label", "refused"),
    [
        ("approve", False),
        ("x" * 24, False),
        ("é" * 24, False),
        ("big bag", False),
        ("", True),
        ("x" * 25, True),
        ("a,b", True),
        ("tab\there", True),
        ("\x85next", True),
        ("\u2003", False),  # an em space is text (the engine drops plain spaces only)
    ],
)
def test_a_choice_is_1_to_24_characters_without_comma_or_control(label: str, refused: bool) -> None:
    assert (choice_refusal(label) is not None) is refused


def test_choices_are_at_most_four_and_differ_ignoring_case() -> None:
    assert choices_refusal([]) is None
    assert choices_refusal(["a", "b", "c", "d"]) is None
    assert choices_refusal(["a", "b", "c", "d", "e"]) is not None
    assert choices_refusal(["Yes", "yes"]) is not None
    assert choices_refusal(["ok", "a,b"]) is not None


def test_buttons_go_two_to_a_row_in_order() -> None:
    buttons = tuple((f"c{n}", f"t{n}") for n in range(4))
    assert keyboard_rows(buttons[:1]) == [[("c0", "t0")]]
    assert keyboard_rows(buttons[:3]) == [[("c0", "t0"), ("c1", "t1")], [("c2", "t2")]]
    assert keyboard_rows(buttons) == [list(buttons[:2]), list(buttons[2:])]
    assert keyboard_rows(()) == []


def test_an_ask_never_joins_a_digest() -> None:
    head = [entry(1), entry(2), entry(3, ask=7), entry(4), entry(5)]
    carried, text = next_message(head)
    assert [e.seq for e in carried] == [1, 2]
    assert text == "2 updates\n\nrow 1\n\nrow 2"
    assert ask_buttons(carried) is None
    carried, text = next_message(head[2:])
    assert [e.seq for e in carried] == [3]
    assert text == "row 3"
    assert ask_buttons(carried) == [[("yes", "b-3"), ("no", "b-3n")]]
    carried, _ = next_message(head[3:])
    assert [e.seq for e in carried] == [4, 5]


def test_an_ask_in_doubt_rings_again_alone_marked_with_its_buttons() -> None:
    carried, text = next_message([entry(3, ask=7, repeat="s1"), entry(4, repeat="s1")])
    assert [e.seq for e in carried] == [3]
    assert text == REPEAT_MARKER + "row 3"
    assert ask_buttons(carried) == [[("yes", "b-3"), ("no", "b-3n")]]


def test_the_chat_is_remembered_as_telegram_names_it() -> None:
    assert chat_key("4242") == 4242
    assert chat_key("-100123") == -100123
    assert chat_key("@household") == "@household"


def test_a_request_rung_again_reads_as_its_ask() -> None:
    key = "q-" + "7" * 32
    request = {
        "id": 7,
        "ask_key": key,
        "title": "order?",
        "choices": ["approve", "decline"],
        "status": "open",
    }
    assert ask_of(request) == Ask(7, key, "order?", ("approve", "decline"))
    assert ask_text(request) == "request #7: order? (approve / decline)"
    assert ask_text({"id": 8, "title": "walk?", "choices": None}) == "request #8: walk?"
    for bad in (
        {"id": 0, "title": "t", "ask_key": key},
        {"id": True, "title": "t", "ask_key": key},
        {"id": 7, "title": "", "ask_key": key},
        {"id": 7, "title": "t", "choices": "a,b", "ask_key": key},
        {"id": 7, "title": "t", "choices": ["a", "A"], "ask_key": key},
        {"id": 7, "title": "t"},  # never asked: no ask key
        {"id": 7, "title": "t", "ask_key": "7"},
    ):
        with pytest.raises(ChiefInputError):
            ask_of(bad)
