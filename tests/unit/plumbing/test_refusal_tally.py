"""The refusal tally: a reason's first refusal said at once, then at most one summary a minute
(count, first peer, distinct peers, since), every one counted; the stop says the rest."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from plumbing.refusals import MAX_PEERS, RefusalTally, Summary


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_refusal_is_said_then_the_minute_is_summed_up() -> None:
    clock = Clock()
    tally = RefusalTally(clock=clock)
    first = tally.refused("service_key", peer="127.0.0.1", path="/a")
    assert first == Summary("service_key", 1, "127.0.0.1", 1, None, "/a")
    for index in range(500):
        clock.now += 0.1
        assert tally.refused("service_key", peer=f"10.0.0.{index % 3}") is None
    clock.now = 1060.0
    summary = tally.refused("service_key", peer="127.0.0.1")
    assert summary is not None
    said = (summary.count, summary.peer, summary.peers, summary.since_s)
    assert said == (501, "10.0.0.0", 4, 60.0)
    assert tally.totals() == {"service_key": 502}


def test_each_reason_keeps_its_own_minute() -> None:
    tally = RefusalTally(clock=Clock())
    assert tally.refused("host") is not None
    assert tally.refused("peer") is not None
    assert tally.refused("host") is None


def test_the_stop_says_what_the_minute_had_not_said() -> None:
    tally = RefusalTally(clock=Clock())
    tally.refused("host")
    tally.refused("host")
    tally.refused("host")
    tally.refused("peer")
    assert [(s.reason, s.count) for s in tally.flush()] == [("host", 2)]
    assert tally.flush() == []


def test_a_flood_of_peers_is_remembered_within_a_bound() -> None:
    tally = RefusalTally(clock=Clock())
    for index in range(MAX_PEERS + 50):
        tally.refused("service_key", peer=f"p{index}")
    (summary,) = tally.flush()
    assert summary.peers == MAX_PEERS + 50 - 1  # the first was said on its own line


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.floats(0, 200)), max_size=200))
def test_every_refusal_is_counted_and_a_reason_speaks_at_most_once_a_minute(
    steps: list[tuple[str, float]],
) -> None:
    clock = Clock()
    tally = RefusalTally(clock=clock)
    said: dict[str, list[float]] = {}
    for reason, step_s in steps:
        clock.now += step_s
        if tally.refused(reason) is not None:
            said.setdefault(reason, []).append(clock.now)
    lines = [s.count for s in tally.flush()]
    for times in said.values():
        assert all(later - earlier >= 60.0 for earlier, later in itertools.pairwise(times))
    counted = sum(len(times) for times in said.values())
    assert sum(tally.totals().values()) == len(steps)
    assert counted + len(lines) <= len(steps)
