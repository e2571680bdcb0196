"""The pure lifecycle rules: the move tables, the refusal words, input checks, the text cut."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine import lifecycle
from engine.errors import LifecycleError, UsageError

LEGAL = [
    ("todo", "take", "open", "taken"),
    ("todo", "take", "taken", "taken"),
    ("todo", "release", "taken", "open"),
    ("todo", "done", "open", "done"),
    ("todo", "done", "taken", "done"),
    ("todo", "abandon", "open", "abandoned"),
    ("todo", "abandon", "taken", "abandoned"),
    ("request", "take", "open", "taken"),
    ("request", "release", "taken", "open"),
    ("request", "close", "open", "closed"),
    ("request", "close", "taken", "closed"),
]


@pytest.mark.parametrize(("kind", "verb", "status", "target"), LEGAL)
def test_legal_moves_lead_where_the_table_says(kind, verb, status, target):
    assert lifecycle.check_move(kind, 7, verb, status) == target


@pytest.mark.parametrize(
    ("kind", "status"), [("todo", "done"), ("todo", "abandoned"), ("request", "closed")]
)
def test_terminal_rows_are_never_retaken(kind, status):
    with pytest.raises(LifecycleError) as caught:
        lifecycle.check_move(kind, 7, "take", status)
    assert str(caught.value) == f"{kind} #7 is {status} — terminal rows are never re-taken"


def test_releasing_an_open_row_names_what_can_be_released():
    with pytest.raises(LifecycleError, match=r"todo #3 is open — only a taken todo"):
        lifecycle.check_move("todo", 3, "release", "open")


def test_abandoning_a_terminal_row_is_refused():
    with pytest.raises(LifecycleError, match="a terminal row cannot be abandoned"):
        lifecycle.check_move("todo", 3, "abandon", "done")


@pytest.mark.parametrize("actor", [None, "", "   ", "two words", "x" * 65])
def test_bad_actors_are_usage_errors(actor):
    with pytest.raises(UsageError):
        lifecycle.require_actor(actor)


def test_missing_reason_names_the_flag():
    with pytest.raises(UsageError, match="--reason"):
        lifecycle.require_reason("  ", "abandon")


@pytest.mark.parametrize("kind", ["", "Note", "has space", "x" * 65, None])
def test_bad_kinds_are_refused_at_write_time(kind):
    with pytest.raises(UsageError, match="kind"):
        lifecycle.require_kind(kind)


def test_text_at_the_limit_is_kept_whole():
    text = "a" * lifecycle.MAX_TEXT_CHARS
    assert lifecycle.cut_text(text) == text


def test_longer_text_is_cut_to_the_limit_with_a_visible_marker():
    cut = lifecycle.cut_text("b" * 10_000)
    assert len(cut) == lifecycle.MAX_TEXT_CHARS
    assert "cut by coop: 10000 characters" in cut
    assert cut.startswith("b" * 3000)


def test_ago_speaks_in_the_largest_whole_unit():
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    five_hours = (now - timedelta(hours=5, minutes=3)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert lifecycle.ago(five_hours, now) == "5h ago"
    assert lifecycle.ago("2026-11-29T11:58:00.000Z", now) == "2m ago"


def test_a_deadline_decision_names_its_choice_without_a_clash() -> None:
    """Issue 34: the choice after the words, so a default named `no` reads as the choice."""
    at = datetime(2026, 12, 3, 18, 0).timestamp()  # local time, as the owner's clock says
    assert lifecycle.deadline_text(5, "pay the plumber?", at, "no") == (
        'request #5 "pay the plumber?": no answer by its deadline (18:00), so closed with: no'
    )
    assert lifecycle.deadline_text(5, "pay the plumber?", at, None) == (
        'request #5 "pay the plumber?": no answer by its deadline (18:00), so abandoned'
    )
