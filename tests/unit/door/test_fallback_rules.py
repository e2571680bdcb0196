"""The fallback channel's pure rules (chief.fallback_rules): the hourly allowance, as a property
over any arrivals of entries in time, and the words the owner reads."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chief.fallback_rules import (
    HOUR_S,
    NOTICE,
    NOTICE_SUBJECT,
    POSSIBLE_REPEAT,
    REPORT,
    URGENT_SUBJECT,
    Entry,
    carries_password,
    compose,
    next_message,
    notice_message,
    report_message,
    shown_url,
    split_urls,
)


def simulate(arrivals: list[float], max_per_hour: int) -> list[tuple[float, list[int]]]:
    """A sender that asks `next_message` at every arrival and whenever a message leaves the
    last hour, until nothing waits: each message's time and the entries it carried."""
    pending = sorted((at, seq) for seq, at in enumerate(arrivals))
    waiting: list[Entry] = []
    sent: list[tuple[float, list[int]]] = []
    now = 0.0
    for _ in range(10 * len(arrivals) + 10):  # bounded: every turn sends or moves time on
        while pending and pending[0][0] <= now:
            _, seq = pending.pop(0)
            waiting.append(Entry(seq, REPORT, f"{URGENT_SUBJECT}{seq}", f"report {seq}"))
        in_hour = [at for at, _ in sent if at > now - HOUR_S]
        message = next_message(waiting, len(in_hour), max_per_hour)
        if message is not None:
            sent.append((now, message.seqs))
            waiting = [entry for entry in waiting if entry.seq not in message.seqs]
            continue
        later = [pending[0][0]] if pending else []
        if waiting and in_hour:
            later.append(min(in_hour) + HOUR_S + 1e-6)
        if not later:
            return sent
        now = min(later)
    raise AssertionError("the sender did not settle")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    arrivals=st.lists(st.floats(0, 4 * HOUR_S, allow_nan=False), min_size=1, max_size=40),
    max_per_hour=st.integers(1, 15),
)
def test_no_hour_carries_more_than_the_bound_and_every_entry_goes_exactly_once(
    arrivals: list[float], max_per_hour: int
) -> None:
    sent = simulate(arrivals, max_per_hour)
    times = [at for at, _ in sent]
    for at in times:  # any hour-long window, anchored at each message
        assert sum(1 for other in times if at <= other < at + HOUR_S) <= max_per_hour
    carried = [seq for _, seqs in sent for seq in seqs]
    assert sorted(carried) == list(range(len(arrivals)))  # none lost, none twice
    # A digest (several entries) only ever closes an hour's allowance.
    for at, seqs in sent:
        if len(seqs) > 1:
            assert sum(1 for other in times if at - HOUR_S < other <= at) == max_per_hour


def test_the_notice_says_since_when_why_and_how_many_wait() -> None:
    title, body = notice_message(0.0, "Telegram refuses the messages (403)", 4, 600.0)
    assert title == f"{NOTICE_SUBJECT}since 1970-01-01 00:00 UTC"
    assert "since 1970-01-01 00:00 UTC (10 min): Telegram refuses the messages (403)" in body
    assert "4 report(s) wait" in body


def test_a_report_says_how_to_acknowledge_it() -> None:
    title, body = report_message(7, "the freezer is warm\nat 3 am", 0.0, "unreachable")
    assert title == "URGENT: the freezer is warm at 3 am"
    assert "`chief ack 7`" in body
    assert '"Got it"' in body


def test_a_repeat_says_so_and_a_digest_names_each_entry() -> None:
    alone = compose([Entry(1, REPORT, "URGENT: a", "body a", repeat=True)])
    assert alone.body.startswith(POSSIBLE_REPEAT)
    digest = compose([Entry(1, NOTICE, "Telegram is down", "n"),
                      Entry(2, REPORT, "URGENT: a", "body a"),
                      Entry(3, REPORT, "URGENT: b", "body b", repeat=True)])  # fmt: skip
    assert digest.seqs == [1, 2, 3]
    assert digest.title == "URGENT: a (+2 more)"
    assert "body a" in digest.body
    assert f"URGENT: b {POSSIBLE_REPEAT}" in digest.body


def test_urls_split_and_are_shown_without_their_secrets() -> None:
    assert split_urls(" a://1 ,b://2\n\tc://3,, ") == ["a://1", "b://2", "c://3"]
    assert shown_url("mailto://coop:hunter2@example.org") == "mailto://… (33 characters)"
    assert shown_url("hunter2") == "?://… (7 characters)"


def test_a_password_in_a_url_is_told_from_a_user_alone() -> None:
    assert carries_password("mailtos://coop:secret@example.org?to=me@example.org")
    assert carries_password("pover://user:token@example.org")
    assert not carries_password("mailto://coop@localhost?smtp=127.0.0.1&to=a@b.org")
    assert not carries_password("ntfys://my-topic")
    assert not carries_password("ntfys://host/topic?x=a:b@c")  # the query is not userinfo
    assert not carries_password("not a url: user:pw@host")
