"""Telegram misbehaves while rows flow through the real stack: 429 with `retry_after`, 5xx,
a reply delayed past the door's client timeout (the message was received all the same), and
connection refused (the emulator stopped, then restarted on its port). Nothing is lost, the
Chief has every row once, Telegram rang every row, and no row rings twice: a delayed reply is
still awaited (up to the door's late-reply bound, far past 1.5 s) and marks its rows sent.
Telegram's trouble stays inside the door: the engine delivers every row at its first attempt,
and the door's sender honours Retry-After.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from tests.e2e.proof.proof_checks import (
    Producers,
    measure,
    settle,
    start_note,
    wait_delivered,
)
from tests.e2e.proof.proof_stack import MakeStack, ProofStack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROWS = 100
PRODUCERS = 2
PRODUCE_S = 4.0
# The door's deadline is 1 s; a delayed reply comes after 1.5 s: a slow send, still awaited.
TELEGRAM_TIMEOUT_S = "1"
DELAY_S = 1.5
TOO_MANY = 2  # 429s, each asking for retry_after 1 s
# Two in a row meet the sender's doubling backoff (1 s, then 2 s); a third only waits 4 s more.
SERVER_ERRORS = 2
DELAYED = 2
TRICKLE = 3  # rows each event starts after it armed its fault
TRICKLE_RATE = 10.0
EVENT_WAIT_S = 60.0
# One more row while armed faults are left and the door's queue is empty (bounded).
TOP_UP_EVERY_S = 3.0
MAX_TOP_UPS = 10
SETTLE_S = 60.0


def _send_failures(stack: ProofStack) -> int:
    return len(stack.door.all_events("door.send_failed"))


def test_proof_telegram_faults_lose_nothing_and_only_delayed_replies_ring_twice(
    seed: int,
    make_stack: MakeStack,
    producers: list[Producers],
    record_property: Callable[[str, object], None],
) -> None:
    rng = random.Random(seed)
    stack = make_stack(door_env={"TELEGRAM_TIMEOUT_S": TELEGRAM_TIMEOUT_S})
    stack.start()
    group = Producers(stack)
    producers.append(group)
    for n in range(PRODUCERS):
        share = ROWS // PRODUCERS
        group.start(seed=rng.randrange(2**32), count=share, rate=share / PRODUCE_S, tag=f"t{n}")

    # Rows no longer wait on Telegram, so the bulk may be delivered and rung before a fault is
    # armed: each event starts a few more rows of its own, which meet the fault.
    trickles = Producers(stack)
    producers.append(trickles)

    def trickle(tag: str) -> None:
        trickles.start(seed=rng.randrange(2**32), count=TRICKLE, rate=TRICKLE_RATE, tag=tag)

    def arm_429() -> None:
        stack.arm_telegram_fault(mode="429", count=TOO_MANY, retry_after=1)
        trickle("k429")

    def arm_5xx() -> None:
        status = rng.choice((500, 502, 503))
        stack.arm_telegram_fault(mode="5xx", count=SERVER_ERRORS, status=status)
        trickle("k5xx")

    def arm_delay() -> None:
        stack.arm_telegram_fault(mode="delay", count=DELAYED, delay_s=DELAY_S)
        trickle("kdelay")

    def refuse() -> None:
        before = _send_failures(stack)
        assert stack.emulator.terminate() == 0
        trickle("krefuse")
        # Down until the door has met the refused connection at least once.
        wait_until_sync(
            lambda: _send_failures(stack) > before,
            timeout_s=EVENT_WAIT_S,
            what=f"the door to meet a refused connection (PROOF_SEED={seed})",
        )
        stack.emulator.start()

    top_ups: list[float] = []

    def spent_or_topped_up() -> bool:
        if stack.telegram_faults_left() == 0:
            return True
        quiet = not top_ups or time.monotonic() - top_ups[-1] > TOP_UP_EVERY_S
        if quiet and len(top_ups) < MAX_TOP_UPS and stack.telegram_queue_depth() == 0:
            top_ups.append(time.monotonic())
            # A tag of its own: the proof tells rows apart by their text.
            tag = f"ktop{len(top_ups)}"
            trickles.start(seed=rng.randrange(2**32), count=1, rate=TRICKLE_RATE, tag=tag)
        return False

    events = [arm_429, arm_5xx, arm_delay, refuse]
    rng.shuffle(events)
    thresholds = sorted(int(rng.uniform(0.05, 0.8) * ROWS) for _ in events)
    for event, threshold in zip(events, thresholds, strict=True):
        wait_delivered(
            stack,
            threshold,
            timeout_s=EVENT_WAIT_S,
            what=f"before {event.__name__} (PROOF_SEED={seed})",
        )
        event()
        # Spent before the next event: a restart of the emulator forgets armed faults. A late
        # reply is awaited, not retried, so the event's rows may all ride in one digest that
        # spends one fault: while faults are left and nothing is queued, one more row is sent.
        wait_until_sync(
            lambda: spent_or_topped_up(),
            timeout_s=EVENT_WAIT_S,
            what=f"the emulator to spend {event.__name__}'s faults (PROOF_SEED={seed})",
            poll_s=0.2,
        )
        # And Telegram's queue drained again, so the next fault meets a fresh head row.
        wait_until_sync(
            lambda: stack.telegram_queue_depth() == 0,
            timeout_s=EVENT_WAIT_S,
            what=f"the door's Telegram queue to drain after {event.__name__} (PROOF_SEED={seed})",
        )

    committed = set(group.finish()) | set(trickles.finish())
    settle(stack, committed, timeout_s=SETTLE_S)
    exits = stack.stop()
    figures = measure(stack, seed=seed, committed=committed, crashes={}, deaths=[])
    # One `door.send_failed` line when an outage starts, one `door.send_recovered` (with the
    # sends that failed in it) when a send goes through again.
    failures = stack.door.all_events("door.send_failed")
    recovered = stack.door.all_events("door.send_recovered")
    failed_sends = sum(int(e["failed_sends"]) for e in recovered)
    slow = stack.door.all_events("door.send_slow")
    retry_after = [e for e in failures if e.get("retry_after_s")]
    deferrals = stack.engine.all_events("outbox.deferred")
    figures.notes += [
        f"Telegram faults: 429 x{TOO_MANY}, 5xx x{SERVER_ERRORS}, delayed x{DELAYED},"
        f" emulator stopped x1; the door's failed sends {failed_sends} in {len(failures)}"
        f" outages ({len(retry_after)} begun by a Retry-After), engine deferrals"
        f" {len(deferrals)}",
        start_note(stack),
    ]
    figures.show(record_property)
    assert exits == {"engine": 0, "door": 0, "emulator": 0}
    # Every fault bit the door's sender (a late reply as a slow send, not a failed one), and
    # none of it reached the engine.
    assert failed_sends >= TOO_MANY + SERVER_ERRORS + 1
    assert len(recovered) == len(failures)  # every outage ended, each logged once
    assert len(slow) >= DELAYED
    assert retry_after  # the 429s' outage began with Telegram's Retry-After, honoured below
    assert all(e["retry_in_s"] >= e["retry_after_s"] for e in retry_after)
    assert deferrals == []
    assert figures.delivery_attempts == len(committed)
    figures.check()
    assert figures.telegram_repeats == 0, figures.lines()
