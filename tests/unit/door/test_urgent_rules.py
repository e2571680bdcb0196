"""The urgent reports' bounds and words (chief.urgent_rules): the interval is never below 30 s
unless the test-only setting says so, the expiry lies between one interval and 3 h, the ladder's
escalation never below 60 s (issue 35) unless the test-only setting says so, any other value is
one DoorError naming its setting; the words the other parts match on, the acknowledgement's
naming who."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chief.errors import DoorError
from chief.urgent_rules import (
    DEFAULT_ESCALATE_S,
    DEFAULT_EXPIRE_S,
    DEFAULT_RERING_S,
    MACHINE,
    MAX_EXPIRE_S,
    MIN_ESCALATE_S,
    MIN_RERING_S,
    SECOND,
    TEST_MIN_ESCALATE_S,
    TEST_MIN_RERING_S,
    TEST_SETTING,
    UrgentBounds,
    acknowledged_line,
    bounds_from_env,
    escalated_text,
    expired_line,
    marked,
    repeat_text,
)


def test_the_defaults_are_a_minute_for_an_hour() -> None:
    bounds = bounds_from_env({})
    assert (bounds.rering_s, bounds.expire_s) == (DEFAULT_RERING_S, DEFAULT_EXPIRE_S) == (60, 3600)
    assert bounds.max_rings == 61
    assert not bounds.test_short


@pytest.mark.parametrize("rering", ["29.9", "1", "0.5"])
def test_an_interval_below_30_s_is_refused_in_production(rering: str) -> None:
    with pytest.raises(DoorError, match=r"CHIEF_URGENT_RERING_S.*below 30 s"):
        bounds_from_env({"CHIEF_URGENT_RERING_S": rering})


def test_the_test_setting_allows_a_short_interval_and_no_shorter() -> None:
    env = {TEST_SETTING: "1", "CHIEF_URGENT_RERING_S": "1", "CHIEF_URGENT_EXPIRE_S": "6"}
    assert bounds_from_env(env) == UrgentBounds(1.0, 6.0, test_short=True)
    with pytest.raises(DoorError, match=r"below 0\.2 s"):
        bounds_from_env(env | {"CHIEF_URGENT_RERING_S": "0.1"})


def test_the_ladder_climbs_after_ten_minutes_and_never_sooner_than_one_in_production() -> None:
    assert bounds_from_env({}).escalate_s == DEFAULT_ESCALATE_S == 600
    assert bounds_from_env({"CHIEF_ESCALATE_AFTER_S": "60"}).escalate_s == MIN_ESCALATE_S
    with pytest.raises(DoorError, match=r"^CHIEF_ESCALATE_AFTER_S=59\.9 is below 60 s"):
        bounds_from_env({"CHIEF_ESCALATE_AFTER_S": "59.9"})
    short = {TEST_SETTING: "1", "CHIEF_URGENT_RERING_S": "1", "CHIEF_URGENT_EXPIRE_S": "6"}
    assert bounds_from_env(short | {"CHIEF_ESCALATE_AFTER_S": "2"}).escalate_s == 2.0
    with pytest.raises(DoorError, match=rf"below {TEST_MIN_ESCALATE_S:g} s"):
        bounds_from_env(short | {"CHIEF_ESCALATE_AFTER_S": "0.1"})


@given(escalate=st.one_of(st.text(max_size=12), st.floats().map(str)), short=st.booleans())
def test_any_escalation_setting_is_taken_above_its_floor_or_refused_in_one_error(
    escalate: str, short: bool
) -> None:
    env = {"CHIEF_ESCALATE_AFTER_S": escalate, TEST_SETTING: "1" if short else ""}
    try:
        bounds = bounds_from_env(env)
    except DoorError as exc:
        refusal = str(exc)
    else:
        assert bounds.escalate_s >= (TEST_MIN_ESCALATE_S if short else MIN_ESCALATE_S)
        return
    assert "\n" not in refusal
    assert refusal.startswith("CHIEF_ESCALATE_AFTER_S=")


@pytest.mark.parametrize(
    "env",
    [
        {"CHIEF_ESCALATE_AFTER_S": "30"},
        {"CHIEF_ESCALATE_AFTER_S": "ten minutes"},
        {"CHIEF_URGENT_EXPIRE_S": "20"},  # below the interval
        {"CHIEF_URGENT_EXPIRE_S": str(MAX_EXPIRE_S + 1)},  # past 3 h
        {"CHIEF_URGENT_RERING_S": "nan"},
        {"CHIEF_URGENT_RERING_S": "-60"},
        {"CHIEF_URGENT_EXPIRE_S": "inf"},
        {"CHIEF_URGENT_EXPIRE_S": "an hour"},
    ],
)
def test_a_wrong_bound_is_one_door_error_naming_it(env: dict[str, str]) -> None:
    with pytest.raises(DoorError, match=next(iter(env))):
        bounds_from_env(env)


@given(
    rering=st.one_of(st.text(max_size=12), st.floats().map(str)),
    expire=st.one_of(st.text(max_size=12), st.floats().map(str)),
    short=st.sampled_from(["", "1", "0", "yes"]),
)
def test_any_setting_is_taken_within_bounds_or_refused_in_one_error(
    rering: str, expire: str, short: str
) -> None:
    env = {"CHIEF_URGENT_RERING_S": rering, "CHIEF_URGENT_EXPIRE_S": expire, TEST_SETTING: short}
    try:
        bounds = bounds_from_env(env)
    except DoorError:
        return
    floor = TEST_MIN_RERING_S if short == "1" else MIN_RERING_S
    assert floor <= bounds.rering_s <= bounds.expire_s <= MAX_EXPIRE_S


def test_the_words_the_other_parts_match_on() -> None:
    created = datetime(2026, 12, 3, 14, 0, tzinfo=UTC).timestamp()
    assert marked("the freezer is warm", 4000) == "URGENT: the freezer is warm"
    assert len(marked("x" * 4000, 4000)) == 4000
    assert repeat_text(3, created, created + 150, "the freezer is warm") == (
        "URGENT, again (ring 3, waiting 2 min): the freezer is warm"
    )
    assert acknowledged_line(created + 300, 6, "the freezer\nis warm", UTC) == (
        "acknowledged at 14:05 by the owner (after 6 rings): the freezer"
    )
    assert acknowledged_line(created + 300, 7, "the freezer", UTC, by=SECOND) == (
        "acknowledged at 14:05 by the second person (after 7 rings): the freezer"
    )
    assert acknowledged_line(created + 300, 7, "the freezer", UTC, by=MACHINE) == (
        "acknowledged at 14:05 by chief ack on the machine (after 7 rings): the freezer"
    )
    assert escalated_text(created, created + 600, "the freezer is warm") == (
        "URGENT, nobody acknowledged it for 10 min: the freezer is warm"
    )
    assert expired_line(61, created, created + 3600, "the freezer is warm") == (
        "went unacknowledged after 61 rings in 60 min: the freezer is warm"
    )
