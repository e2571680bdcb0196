"""Telegram off the critical path, on the real stack (engine service, door, emulator processes):
Telegram failing every send never holds back the Chief or the engine; a Chief-only install
delivers every row; a backlog meets Telegram's flood limits with digests and no 429; a door
killed with a full Telegram queue rings everything after its restart."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from tests.e2e.proof.proof_checks import (
    DoorDeath,
    Producers,
    carried_texts,
    measure,
    settle,
    window_deaths,
)
from tests.e2e.proof.proof_stack import MakeStack, ProofStack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PHASE_ROWS = 4
FAST_RATE = 2000.0  # the library producer, as fast as it commits
LANDED_WITHIN_S = 10.0
RECOVERY_S = 90.0  # the sender's backoff after a long outage is up to 60 s
FLOOD_ROWS = 300
EMULATOR_BURST = 3
KILLED_QUEUE = 100
KILLS = 3


def _ids(group: Producers) -> list[int]:
    return sorted(group.finish())


def _produce(
    stack: ProofStack, producers: list[Producers], rng: random.Random, count: int, tag: str
) -> list[int]:
    group = Producers(stack)
    producers.append(group)
    group.start(seed=rng.randrange(2**32), count=count, rate=FAST_RATE, tag=tag)
    return _ids(group)


def _in_chief_and_delivered(stack: ProofStack, ids: list[int]) -> None:
    def done() -> bool:
        rows = stack.outbox()
        return set(ids) <= set(stack.chief_lines()) and all(
            rows[i]["state"] == "delivered" for i in ids
        )

    wait_until_sync(done, timeout_s=LANDED_WITHIN_S, what=f"rows {ids} in the Chief, delivered")


def _rung_texts(stack: ProofStack) -> list[str]:
    known = {r["text"] for r in stack.outbox().values()}
    return [t for m in stack.telegram_messages() for t in carried_texts(m["text"], known)]


def _texts_in_order(stack: ProofStack) -> list[str]:
    rows = stack.outbox()
    return [rows[i]["text"] for i in sorted(rows)]


def test_telegram_failing_every_send_holds_back_neither_the_chief_nor_the_engine(
    seed: int, make_stack: MakeStack, producers: list[Producers]
) -> None:
    rng = random.Random(seed)
    stack = make_stack()
    stack.start()
    committed: list[int] = []
    stack.arm_telegram_fault(mode="5xx", count=10_000, status=502)
    for phase in ("5xx", "429", "refused"):
        if phase == "429":
            # One step: a reset then an arm would leave a moment in which a send succeeds.
            stack.arm_telegram_fault(mode="429", count=10_000, retry_after=1, replace=True)
        if phase == "refused":
            assert stack.emulator.terminate() == 0
        ids = _produce(stack, producers, rng, PHASE_ROWS, tag=f"f{phase}")
        _in_chief_and_delivered(stack, ids)  # within seconds, whatever Telegram does
        committed += ids
    assert stack.chief_order() == sorted(committed)
    assert stack.telegram_messages() == []

    stack.emulator.start()  # Telegram is back: each row's text once, in order
    wait_until_sync(
        lambda: len(_rung_texts(stack)) >= len(committed),
        timeout_s=RECOVERY_S,
        what="every row rung after the recovery",
    )
    assert _rung_texts(stack) == _texts_in_order(stack)
    assert stack.engine.all_events("outbox.deferred") == []
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}


def test_chief_only_install_delivers_every_row(
    seed: int, make_stack: MakeStack, producers: list[Producers]
) -> None:
    rng = random.Random(seed)
    stack = make_stack(door_env={"TELEGRAM_BOT_TOKEN": "", "TELEGRAM_CHAT_ID": ""})
    stack.start()
    ids = _produce(stack, producers, rng, 3 * PHASE_ROWS, tag="c")
    _in_chief_and_delivered(stack, ids)
    assert stack.pending_count() == 0
    assert stack.chief_order() == ids
    assert stack.telegram_messages() == []
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}


def test_a_backlog_meets_the_flood_limits_with_digests_and_no_429(
    seed: int,
    make_stack: MakeStack,
    producers: list[Producers],
    record_property: Callable[[str, object], None],
) -> None:
    rng = random.Random(seed)
    stack = make_stack(emulator_args=("--flood-limits",))
    stack.start()
    assert stack.door.terminate() == 0  # the door is down while the backlog builds
    ids = _produce(stack, producers, rng, FLOOD_ROWS, tag="b")
    up_at = time.monotonic()
    stack.door.start()
    settle(stack, set(ids), timeout_s=RECOVERY_S)
    drain_s = time.monotonic() - up_at
    messages = stack.telegram_messages()
    too_many = stack.telegram_calls()["too_many_requests"]
    print(f"backlog {FLOOD_ROWS}: drained in {drain_s:.2f} s, {len(messages)} messages")
    print(f"429s {too_many}")
    record_property("flood_drain_s", round(drain_s, 2))
    record_property("flood_messages", len(messages))
    assert too_many == 0
    assert len(messages) <= drain_s + EMULATOR_BURST
    assert _rung_texts(stack) == _texts_in_order(stack)
    assert stack.chief_order() == ids
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}


def test_door_killed_with_a_full_telegram_queue_rings_everything_after_restart(
    seed: int,
    make_stack: MakeStack,
    producers: list[Producers],
    record_property: Callable[[str, object], None],
) -> None:
    rng = random.Random(seed)
    stack = make_stack()
    stack.start()
    door_started_at = 0.0
    assert stack.emulator.terminate() == 0  # Telegram refuses: the door's queue fills
    ids = _produce(stack, producers, rng, KILLED_QUEUE, tag="q")
    wait_until_sync(
        lambda: stack.telegram_queue_depth() == KILLED_QUEUE,
        timeout_s=LANDED_WITHIN_S,
        what="the door's Telegram queue to hold every row",
    )
    stack.emulator.start()
    deaths: list[DoorDeath] = []
    for _ in range(KILLS):
        # Somewhere in the sender's next try: before the send, inside it, or after the mark.
        time.sleep(rng.uniform(0.0, 1.5))  # the kill's moment, drawn from the seed
        died_at = time.time()
        stack.door.kill()
        started_at = time.time()
        stack.door.start()
        deaths.append(DoorDeath(door_started_at, died_at, successor_at=started_at))
        door_started_at = started_at
    settle(stack, set(ids), timeout_s=RECOVERY_S)
    exits = stack.stop()
    figures = measure(stack, seed=seed, committed=set(ids), crashes={"door": KILLS}, deaths=deaths)
    figures.show(record_property)
    assert exits == {"engine": 0, "door": 0, "emulator": 0}
    assert window_deaths(stack, deaths) == figures.window_deaths
    assert figures.in_doubt_events >= figures.window_deaths, figures.lines()
    figures.check()
