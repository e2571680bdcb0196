"""The pure rules: which source ids a report accepts and the turn kind each lands with."""

from __future__ import annotations

import pytest

from chief.errors import ChiefInputError
from chief.model import (
    check_message,
    check_report_text,
    report_key,
    turn_kind_for_key,
    turn_kind_for_source,
)


@pytest.mark.parametrize(
    ("source_id", "turn_kind"),
    [
        ("coop-notify:41", "coop"),
        ("coop-notify:abc-7", "coop"),
        ("cron:backup", "cron"),
        ("cron:nightly:tidy", "cron"),
    ],
)
def test_the_prefix_names_the_turn_kind(source_id: str, turn_kind: str) -> None:
    assert turn_kind_for_source(source_id) == turn_kind
    assert report_key(source_id) == "chief-report:" + source_id
    assert turn_kind_for_key(report_key(source_id)) == turn_kind


@pytest.mark.parametrize(
    "source_id",
    ["", "41", "webhook:1", "coop:41", "Cron:backup", "coop-notify:", "cron:  ", "x" * 300],
)
def test_an_unknown_or_empty_source_is_refused_listing_what_is_accepted(source_id: str) -> None:
    with pytest.raises(ChiefInputError) as raised:
        turn_kind_for_source(source_id)
    assert "coop-notify:" in str(raised.value)
    assert "cron:" in str(raised.value)


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_report_text_is_refused(text: str) -> None:
    with pytest.raises(ChiefInputError, match="empty"):
        check_report_text(text)


def test_report_text_is_kept_as_given() -> None:
    assert check_report_text("  todo #41 done\n") == "  todo #41 done\n"


@pytest.mark.parametrize(
    ("role", "turn_kind", "origin", "field"),
    [
        ("bot", "chat", "user", "role"),
        ("user", "voice", "user", "turn_kind"),
        ("assistant", "chat", "cron", "origin"),
    ],
)
def test_a_bad_message_field_is_named(role: str, turn_kind: str, origin: str, field: str) -> None:
    with pytest.raises(ChiefInputError, match=field):
        check_message(role, "hi", turn_kind, origin)


def test_a_good_message_passes() -> None:
    check_message("assistant", "hi", "coop", "scheduled_task")
