"""A late Telegram reply is not a lost one: with the door's deadline at 1 s and Telegram
answering its next three sends only after 1.5 s while 30 rows queue (the real stack: engine
service, door, emulator processes; the door's real python-telegram-bot client), every row rings,
and no row rings again: each late send is still awaited (up to the door's hard bound, 6 x the
deadline) and its answer marks its rows sent. Repeats are counted per row, never per message, and
bounded by the in-doubt events the door recorded (none here: nothing was in doubt)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tests.e2e.proof.proof_checks import Producers, measure, settle
from tests.e2e.proof.proof_stack import MakeStack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

ROWS = 30
LATE_REPLIES = 3
# The deadline test_proof_telegram.py gives the door and a reply half as late again, as it arms
# its delays: a reply is late for coming past the deadline and inside the hard bound, not for
# how long it takes (at 2 s and 4 s the three replies alone held the run for 12 s).
TELEGRAM_TIMEOUT_S = "1"
LATE_S = 1.5
PRODUCE_S = 5.0  # rows keep arriving through the three late sends (about 1.5 s each)
SETTLE_S = 60.0


def test_three_late_telegram_replies_ring_every_row_and_repeat_none(
    seed: int,
    make_stack: MakeStack,
    producers: list[Producers],
    record_property: Callable[[str, object], None],
) -> None:
    rng = random.Random(seed)
    stack = make_stack(door_env={"TELEGRAM_TIMEOUT_S": TELEGRAM_TIMEOUT_S})
    stack.start()
    # Each of the next three sendMessage calls is kept (the message is delivered) and answered
    # 1.5 s later: past the door's deadline, inside its hard bound.
    stack.arm_telegram_fault(mode="delay", count=LATE_REPLIES, delay_s=LATE_S, replace=True)
    group = Producers(stack)
    producers.append(group)
    group.start(seed=rng.randrange(2**32), count=ROWS, rate=ROWS / PRODUCE_S, tag="late")
    committed = set(group.finish())
    settle(stack, committed, timeout_s=SETTLE_S)
    wait_until_sync(
        lambda: stack.telegram_queue_depth() == 0, timeout_s=SETTLE_S, what="the queue drained"
    )
    faults_left = stack.telegram_faults_left()
    exits = stack.stop()
    figures = measure(stack, seed=seed, committed=committed, crashes={}, deaths=[])
    figures.notes.append(f"late replies armed {LATE_REPLIES}, left unspent {faults_left}")
    figures.show(record_property)
    assert exits == {"engine": 0, "door": 0, "emulator": 0}
    assert faults_left == 0, "the three late replies were not all met"
    assert figures.telegram_repeats <= LATE_REPLIES, figures.lines()
    assert max(figures.telegram_per_row) - 1 <= LATE_REPLIES, figures.lines()
    figures.check()
