"""Mapping a door's answer to delivered / deferred, backoff with jitter, Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notifier.outcome import (
    BackoffPolicy,
    Deferred,
    Delivered,
    DoorReply,
    backoff_s,
    classify,
    parse_retry_after,
)

POLICY = BackoffPolicy(base_s=1.0, max_s=300.0)
NOW = 1_800_000_000.0


def _classify(reply: DoorReply, attempt: int = 1, rand: float = 0.0) -> Delivered | Deferred:
    return classify(reply, attempt=attempt, policy=POLICY, now_epoch=NOW, rand=rand)


def test_a_2xx_json_object_is_delivered_with_the_answer_recorded() -> None:
    outcome = _classify(DoorReply(status=200, body=b'{"delivered": true, "channel": "x"}'))
    assert outcome == Delivered(answer='{"channel":"x","delivered":true}')


@pytest.mark.parametrize("body", [b"", b"<html>", b"[1, 2]", b'"ok"', b"\xff\xfe"])
def test_a_2xx_with_a_malformed_answer_is_a_deferral(body: bytes) -> None:
    outcome = _classify(DoorReply(status=200, body=body))
    assert isinstance(outcome, Deferred)
    assert "malformed answer" in outcome.error


def test_a_503_names_the_doors_detail_and_backs_off() -> None:
    reply = DoorReply(status=503, body=b'{"detail": "notification_channel_unavailable"}')
    outcome = _classify(reply)
    assert outcome == Deferred(
        error="HTTP 503: notification_channel_unavailable",
        retry_in_s=0.5,
        answer='{"detail": "notification_channel_unavailable"}',
    )


def test_retry_after_wins_when_it_is_later_than_the_backoff() -> None:
    reply = DoorReply(status=503, body=b"{}", retry_after="3")
    outcome = _classify(reply)
    assert isinstance(outcome, Deferred)
    assert outcome.retry_in_s == 3.0
    assert outcome.error.endswith("(Retry-After 3)")


def test_the_backoff_wins_when_it_is_later_than_retry_after() -> None:
    outcome = _classify(DoorReply(status=503, retry_after="1"), attempt=6, rand=0.0)
    assert isinstance(outcome, Deferred)
    assert outcome.retry_in_s == 16.0  # cap 32 s at attempt 6, equal jitter floor is half


@pytest.mark.parametrize("status", [301, 400, 401, 404, 422, 500, 502])
def test_any_other_status_is_a_deferral(status: int) -> None:
    outcome = _classify(DoorReply(status=status, body=b"nope"))
    assert isinstance(outcome, Deferred)
    assert outcome.error == f"HTTP {status}: nope"


def test_no_answer_at_all_is_a_deferral_saying_why_in_one_line() -> None:
    outcome = _classify(DoorReply(error="cannot connect\nto the door"))
    assert isinstance(outcome, Deferred)
    assert outcome.error == "cannot connect to the door"


@given(attempt=st.integers(min_value=1, max_value=10_000), rand=st.floats(0.0, 0.999999))
def test_backoff_is_capped_never_zero_and_within_the_jitter_band(attempt: int, rand: float) -> None:
    cap = min(POLICY.max_s, POLICY.base_s * 2 ** min(attempt - 1, 63))
    delay = backoff_s(attempt, POLICY, rand)
    assert cap / 2 <= delay <= cap <= POLICY.max_s


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), (" 120 ", 120.0), ("-5", 0.0), ("", None), ("soon", None), (None, None)],
)
def test_retry_after_seconds(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, NOW) == expected


def test_retry_after_as_an_http_date() -> None:
    when = format_datetime(datetime.fromtimestamp(NOW + 30, tz=UTC), usegmt=True)
    assert parse_retry_after(when, NOW) == pytest.approx(30.0)


def test_an_absurd_retry_after_is_bounded_to_a_day() -> None:
    assert parse_retry_after("99999999", NOW) == 86_400.0
