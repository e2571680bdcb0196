"""Telegram misbehaves while rows flow through the real stack: 429 with `retry_after`, 5xx,
a reply delayed past the door's client timeout (the message was received all the same), and
connection refused (the emulator stopped, then restarted on its port). Nothing is lost, the
Chief has every row once, Telegram rang every row, and only the delayed replies may ring twice.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.e2e.proof.proof_checks import (
    Producers,
    measure,
    settle,
    start_note,
    wait_delivered,
)
from tests.e2e.proof.proof_stack import MakeStack, Stack
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(180)

ROWS = 100
PRODUCERS = 2
PRODUCE_S = 4.0
# The door gives Telegram 1 s; a delayed reply comes after 1.5 s, when the door has given up.
TELEGRAM_TIMEOUT_S = "1"
DELAY_S = 1.5
TOO_MANY = 2  # 429s, each asking for retry_after 1 s
SERVER_ERRORS = 3
DELAYED = 2
EVENT_WAIT_S = 60.0
SETTLE_S = 60.0


def _send_failures(stack: Stack) -> int:
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

    def arm_429() -> None:
        stack.arm_telegram_fault(mode="429", count=TOO_MANY, retry_after=1)

    def arm_5xx() -> None:
        status = rng.choice((500, 502, 503))
        stack.arm_telegram_fault(mode="5xx", count=SERVER_ERRORS, status=status)

    def arm_delay() -> None:
        stack.arm_telegram_fault(mode="delay", count=DELAYED, delay_s=DELAY_S)

    def refuse() -> None:
        before = _send_failures(stack)
        assert stack.emulator.terminate() == 0
        # Down until the door has met the refused connection at least once.
        wait_until_sync(
            lambda: _send_failures(stack) > before,
            timeout_s=EVENT_WAIT_S,
            what=f"the door to meet a refused connection (PROOF_SEED={seed})",
        )
        stack.emulator.start()

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
        # Spent before the next event: a restart of the emulator forgets armed faults.
        wait_until_sync(
            lambda: stack.telegram_faults_left() == 0,
            timeout_s=EVENT_WAIT_S,
            what=f"the emulator to spend {event.__name__}'s faults (PROOF_SEED={seed})",
        )

    committed = set(group.finish())
    settle(stack, committed, timeout_s=SETTLE_S)
    exits = stack.stop()
    figures = measure(stack, seed=seed, committed=committed, crashes={}, deaths=[])
    failures = stack.door.all_events("door.send_failed")
    retry_after = [
        e for e in stack.engine.all_events("outbox.deferred") if "Retry-After" in str(e["error"])
    ]
    figures.notes += [
        f"Telegram faults: 429 x{TOO_MANY}, 5xx x{SERVER_ERRORS}, delayed x{DELAYED},"
        f" emulator stopped x1; the door's failed sends {len(failures)},"
        f" engine deferrals honouring Retry-After {len(retry_after)}",
        start_note(stack),
    ]
    figures.show(record_property)
    assert exits == {"engine": 0, "door": 0, "emulator": 0}
    # Every fault bit: each one failed a send, and each failed send cost the engine a deferral.
    assert len(failures) >= TOO_MANY + SERVER_ERRORS + DELAYED + 1
    assert figures.delivery_attempts >= len(committed) + len(failures)
    assert len(retry_after) >= TOO_MANY
    figures.check(duplicates_allowed=DELAYED)
