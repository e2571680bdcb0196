"""Disk trouble under the Chief while rows flow: chief.db's writes fail the way a full disk
fails them (`sqlite3.OperationalError: database or disk is full`, from the fault mode
`name:raise-while=FLAG`), first only the drainer's landing, then the report's insert too.
The door answers 503, the engine defers, nothing is half-written, and once the space is back
(FLAG deleted, no restart) every row is delivered, its Chief line landed once, Telegram rung once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.proof.proof_checks import (
    Producers,
    measure,
    settle,
    start_note,
    wait_delivered,
)
from tests.e2e.proof.proof_stack import MakeStack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROWS = 100
PRODUCE_S = 5.0
UNLANDED_WHILE_FULL = 2  # reports queued while the landing fails, before the insert fails too
DEFERRALS_WHILE_FULL = 3  # 503s the engine records on its head row before the space returns
EVENT_WAIT_S = 60.0
SETTLE_S = 60.0


def test_proof_full_disk_answers_503_defers_writes_nothing_half_and_delivers_after(
    seed: int,
    make_stack: MakeStack,
    producers: list[Producers],
    record_property: Callable[[str, object], None],
    tmp_path: Path,
) -> None:
    rng = random.Random(seed)
    landing_full = tmp_path / "landing-full"
    insert_full = tmp_path / "insert-full"
    faults = (
        f"chief.store.land_report:raise-while={landing_full},"
        f"chief.store.enqueue_report:raise-while={insert_full}"
    )
    stack = make_stack(door_env={"COOP_TEST_FAULTS": faults})
    stack.start()
    group = Producers(stack)
    producers.append(group)
    group.start(seed=rng.randrange(2**32), count=ROWS, rate=ROWS / PRODUCE_S, tag="d")

    threshold = int(rng.uniform(0.1, 0.4) * ROWS)
    wait_delivered(stack, threshold, timeout_s=EVENT_WAIT_S, what=f"(PROOF_SEED={seed})")
    # The disk fills under the landing first: reports stay queued, durable, and not landed.
    landing_full.touch()
    wait_until_sync(
        lambda: stack.chief_unlanded() >= UNLANDED_WHILE_FULL,
        timeout_s=EVENT_WAIT_S,
        what=f"reports queued while the landing fails (PROOF_SEED={seed})",
    )
    # Then under the report's insert as well: the door cannot take a row and says 503.
    insert_full.touch()

    def head_deferred() -> bool:
        rows = stack.outbox()
        pending = [r for _, r in sorted(rows.items()) if r["state"] == "pending"]
        return (
            bool(pending)
            and pending[0]["attempts"] >= DEFERRALS_WHILE_FULL
            and ("HTTP 503" in str(pending[0]["last_error"]))
        )

    wait_until_sync(
        head_deferred, timeout_s=EVENT_WAIT_S, what=f"503 deferrals (PROOF_SEED={seed})"
    )
    half_written_while_full = stack.chief_half_written()
    unlanded_while_full = stack.chief_unlanded()
    head = min(i for i, r in stack.outbox().items() if r["state"] == "pending")
    head_error = stack.outbox()[head]["last_error"]
    delivered_while_full = {i for i, r in stack.outbox().items() if r["state"] == "delivered"}
    # The door never said yes without holding the report durably.
    missing_reports = delivered_while_full - stack.chief_reported()

    landing_full.unlink()
    insert_full.unlink()
    committed = set(group.finish())
    settle(stack, committed, timeout_s=SETTLE_S)
    exits = stack.stop()
    figures = measure(stack, seed=seed, committed=committed, crashes={}, deaths=[])
    chief_failed = stack.door.all_events("door.chief_failed")
    drain_failed = stack.door.all_events("chief.drain.failed")
    figures.notes += [
        f"while full: head row #{head} deferred with {head_error!r}; Chief reports queued"
        f" unlanded {unlanded_while_full}; half-written {half_written_while_full};"
        f" delivered rows without a durable report {len(missing_reports)}",
        f"the door's failed report inserts {len(chief_failed)},"
        f" failed landings {len(drain_failed)}",
        start_note(stack),
    ]
    figures.show(record_property)
    assert exits == {"engine": 0, "door": 0, "emulator": 0}
    assert half_written_while_full == 0
    assert missing_reports == set()
    assert "chief_unavailable" in str(head_error)
    assert len(chief_failed) >= DEFERRALS_WHILE_FULL
    assert drain_failed
    assert all("disk is full" in str(e["error"]) for e in drain_failed)
    figures.check()
    assert figures.telegram_repeats == 0
