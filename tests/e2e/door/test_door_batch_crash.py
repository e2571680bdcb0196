"""A `chief serve` process that dies in the middle of a notify batch's transaction (after its
first row's writes, before the next row's): on restart chief.db holds no row of the batch, not
even the ones written before the death, and the engine's retry of the whole batch delivers each
row once, in order."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from tests.e2e.door.conftest import Harness, spawn_door
from tests.support.door import batch, body
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(120)

FAULT_EXIT_STATUS = 86


def test_door_dying_inside_a_batch_keeps_no_row_and_the_retry_delivers_each_once(
    harness: Harness,
) -> None:
    ids = [f"crash-{n}" for n in range(5)]
    door = spawn_door(harness.env(COOP_TEST_FAULTS="chief.store.batch_next_row"))
    # A single row first: the fault point is only between two rows of a batch.
    assert harness.notify(door, body("alone", text="row <alone>")).status_code == 200
    with pytest.raises(httpx.TransportError):
        harness.notify_batch(door, batch(ids))
    assert door.proc.wait(15) == FAULT_EXIT_STATUS

    rows = "SELECT COUNT(*) FROM chief_report_outbox WHERE source_key LIKE '%crash-%'"
    entries = "SELECT COUNT(*) FROM telegram_queue WHERE outbox_id LIKE 'crash-%'"
    assert harness._scalar(rows) == 0
    assert harness._scalar(entries) == 0
    assert harness.chief_lines("alone") == 1

    door = spawn_door(harness.env())
    retried = harness.notify_batch(door, batch(ids))
    assert retried.status_code == 200, retried.text
    assert [answer["outbox_id"] for answer in retried.json()["items"]] == ids
    wait_until_sync(
        lambda: all(harness.sent_marks(i) == 1 for i in ids), timeout_s=15, what="every mark"
    )
    joined = "\n".join(harness.emulator.texts())
    for outbox_id in ids:
        assert joined.count(f"row <{outbox_id}>") == 1
        assert harness.chief_lines(outbox_id) == 1
    order = "SELECT content FROM messages ORDER BY id"
    with sqlite3.connect(harness.folder / "chief.db") as conn:
        lines = [row[0] for row in conn.execute(order)]
    assert lines == ["row <alone>", *[f"row <{i}>" for i in ids]]
    assert door.terminate() == 0
