"""The pure part of the door's Telegram delivery: the token bucket, the digest, quiet hours and
the backoff (chief/phone/pacing.py), with the clocks passed in."""

from __future__ import annotations

import random
from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chief.errors import DoorError
from chief.phone.pacing import (
    MAX_TELEGRAM_UTF16_UNITS,
    REPEAT_MARKER,
    QuietHours,
    TokenBucket,
    backoff_s,
    compose,
    pacing_for,
    utf16_units,
)


def test_bucket_gives_its_burst_then_one_token_per_interval() -> None:
    bucket = TokenBucket(2, 1.1, now=100.0)
    for _ in range(2):
        assert bucket.wait_s(100.0) == 0.0
        bucket.take(100.0)
    assert bucket.wait_s(100.0) == pytest.approx(1.1)
    assert bucket.wait_s(100.55) == pytest.approx(0.55)
    assert bucket.wait_s(101.1) == 0.0
    bucket.take(101.1)
    assert bucket.wait_s(101.1) > 0
    assert bucket.wait_s(1000.0) == 0.0  # never more than its capacity
    bucket.take(1000.0)
    bucket.take(1000.0)
    assert bucket.wait_s(1000.0) > 0


def test_pacing_is_per_chat_kind() -> None:
    assert pacing_for("4242") == (2, 1.1)
    assert pacing_for("-100123")[1] > 3.0  # a group: 20 per minute
    assert pacing_for("@channel")[1] > 3.0


def test_a_lone_entry_rings_alone_without_a_header() -> None:
    assert compose(["todo #1 done"]) == (1, "todo #1 done")


def test_a_digest_heads_the_entries_with_their_count_in_order() -> None:
    count, text = compose(["a one", "b two", "c three"])
    assert count == 3
    assert text == "3 updates\n\na one\n\nb two\n\nc three"


def test_an_entry_too_wide_to_share_rings_alone() -> None:
    wide = "x" * 4090
    assert compose([wide, "next"]) == (1, wide)
    count, text = compose(["first", wide])
    assert (count, text) == (1, "first")


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=80))
def test_digests_carry_every_entry_once_in_order_within_the_limit(texts: list[str]) -> None:
    remaining = list(texts)
    carried: list[str] = []
    while remaining:
        count, text = compose(remaining)
        assert count >= 1
        if count > 1:
            assert utf16_units(text) <= MAX_TELEGRAM_UTF16_UNITS
            assert text.startswith(f"{count} updates\n\n")
        carried += remaining[:count]
        remaining = remaining[count:]
    assert carried == texts


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=80))
def test_a_repeat_is_the_same_group_behind_the_marker_and_still_fits(texts: list[str]) -> None:
    count, text = compose(texts)
    again, repeated = compose(texts[:count], repeat=True)
    assert again == count
    assert repeated == REPEAT_MARKER + text
    if count > 1:
        assert utf16_units(repeated) <= MAX_TELEGRAM_UTF16_UNITS


@pytest.mark.parametrize(
    ("window", "local", "quiet"),
    [
        ("22:00-07:00", "23:30", True),
        ("22:00-07:00", "03:00", True),
        ("22:00-07:00", "07:00", False),
        ("22:00-07:00", "12:00", False),
        ("13:00-14:00", "13:30", True),
        ("13:00-14:00", "14:30", False),
    ],
)
def test_quiet_hours_window(window: str, local: str, quiet: bool) -> None:
    zone = ZoneInfo("Europe/Rome")
    hours = QuietHours.parse(window, zone)
    instant = datetime.combine(datetime(2026, 1, 15).date(), time.fromisoformat(local), zone)
    assert hours.is_quiet(instant.astimezone(UTC)) is quiet


@pytest.mark.parametrize("raw", ["22-07", "22:00", "late-early", "07:00-07:00"])
def test_quiet_hours_refuse_a_window_they_cannot_read(raw: str) -> None:
    with pytest.raises(DoorError, match="TELEGRAM_QUIET_HOURS"):
        QuietHours.parse(raw, None)


def test_backoff_doubles_is_capped_and_jittered() -> None:
    rng = random.Random(7)
    waits = [backoff_s(n, rng) for n in range(1, 10)]
    assert 1.0 <= waits[0] <= 1.2
    assert 2.0 <= waits[1] <= 2.4
    assert all(60.0 <= w <= 72.0 for w in waits[6:])
