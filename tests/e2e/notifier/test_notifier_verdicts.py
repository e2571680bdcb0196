"""Each row judged on its own, and a door back within seconds (issue 19, items 3 and 8), with
real processes: `chief serve` on uvicorn, the Telegram emulator, `notifier run`, and the `coop`
CLI an operator would use.

- A row the door refuses (written straight into coop.db, around the engine's checks) among
  valid rows: the rows ahead are delivered, the refused row's own entry names the door's reason
  (`coop outbox list`, `coop status` name it by its id, and no other row), the rows behind it
  wait, and `coop outbox cancel` on it lets them flow within seconds.
- A door that is down while a row waits, then started: the row reaches the Chief within 5 s of
  the door listening, however long the growing backoff would have made it wait.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from engine import direct
from engine import store as engine_store
from engine.outbox import enqueue
from notifier.outcome import BackoffPolicy, backoff_s
from tests.support.procs import coop
from tests.support.stack import Stack
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(90)

# The door listening, then the row in the Chief: the bound the issue sets.
BACK_WITHIN_S = 5.0


def _outbox(db_path: Path) -> dict[int, dict[str, object]]:
    with direct.connection(db_path) as conn:
        found = conn.execute(
            "SELECT id, state, attempts, last_error, next_attempt_at FROM coop_outbox"
        ).fetchall()
    return {int(row["id"]): dict(row) for row in found}


def _chief_lines(chief_db: Path) -> list[str]:
    if not chief_db.exists():
        return []
    with sqlite3.connect(f"file:{chief_db}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT content FROM messages ORDER BY id")]


def _write_rows_with_poison(db_path: Path) -> tuple[list[int], int, list[int]]:
    """Three valid rows, one the door refuses (a kind over its 100 characters, inserted around
    `enqueue`'s checks, as an older version or a hand edit could), three valid rows: one
    transaction, so the notifier's first batch carries all seven."""
    with direct.connection(db_path) as conn, engine_store.write(conn):
        ahead = [enqueue(conn, "note", f"ahead {n}") for n in range(3)]
        cur = conn.execute(
            "INSERT INTO coop_outbox (kind, text, state, created_at, next_attempt_at)"
            " VALUES (?, 'poison', 'pending', ?, ?)",
            ("k" * 101, engine_store.now_iso(), engine_store.now_epoch()),
        )
        poison = int(cur.lastrowid or 0)
        behind = [enqueue(conn, "note", f"behind {n}") for n in range(3)]
    return ahead, poison, behind


def test_a_row_the_door_refuses_holds_only_itself_named_by_its_id_and_cancel_frees_the_rest(
    tmp_path: Path,
) -> None:
    # A long backoff: once refused, the poison row is not tried again during the test.
    stack = Stack(tmp_path, engine_env={"COOP_BACKOFF_BASE_S": "600", "COOP_BACKOFF_MAX_S": "600"})
    try:
        stack.start_door()
        engine_store.open_connection(stack.coop_db).close()
        ahead, poison, behind = _write_rows_with_poison(stack.coop_db)
        stack.start_notifier()

        def settled() -> bool:
            rows = _outbox(stack.coop_db)
            return rows[poison]["attempts"] == 1 and all(
                rows[i]["state"] == "delivered" for i in ahead
            )

        wait_until_sync(settled, timeout_s=20, what="the rows ahead delivered, the poison tried")
        rows = _outbox(stack.coop_db)
        assert rows[poison]["state"] == "pending"
        error = str(rows[poison]["last_error"])
        assert error.startswith("refused by the door (422): kind: "), error
        assert "items" not in error  # the door's reason for this row, not a place in a batch
        for i in behind:  # untouched: they wait behind it (FIFO), and nothing blames them
            assert (rows[i]["state"], rows[i]["attempts"], rows[i]["last_error"]) == (
                "pending",
                0,
                None,
            )
        assert _chief_lines(stack.chief_db) == ["ahead 0", "ahead 1", "ahead 2"]

        listed = coop("outbox", "list", env=stack.env(), inherit=False)
        assert listed.returncode == 0, listed.stderr
        # The LAST ERROR column is `—` for a row that has none.
        blamed = [line for line in listed.stdout.splitlines()[1:] if not line.endswith("—")]
        assert [line.split()[0] for line in blamed] == [f"#{poison}"], listed.stdout
        assert "refused by the door (422): kind: " in blamed[0]
        status = coop("status", env=stack.env(), inherit=False)
        failing = [line.strip() for line in status.stdout.splitlines() if "failing:" in line]
        assert [line.split()[1] for line in failing] == [f"#{poison},"], status.stdout
        assert "refused by the door (422): kind: " in failing[0]

        cancelled = coop(
            "outbox", "cancel", str(poison), "--reason", "the door refuses it",
            env=stack.env(), inherit=False,
        )  # fmt: skip
        assert cancelled.returncode == 0, cancelled.stderr
        wait_until_sync(
            lambda: all(_outbox(stack.coop_db)[i]["state"] == "delivered" for i in behind),
            timeout_s=BACK_WITHIN_S,
            what="the rows behind the cancelled row delivered",
        )
        assert _chief_lines(stack.chief_db) == [
            *[f"ahead {n}" for n in range(3)],
            *[f"behind {n}" for n in range(3)],
        ]
    finally:
        stack.stop()
        stack.close()


@pytest.mark.slow
def test_a_door_that_comes_back_gets_the_waiting_row_within_seconds(tmp_path: Path) -> None:
    # A growing backoff from 4 s: had the refused tries counted in it, by the third the next
    # delay would be at least 8 s, past the 5 s the issue allows once the door listens. The
    # head is tried once; the socket is looked at (nothing written) every second since.
    base_s, max_s = 4.0, 300.0
    policy = BackoffPolicy(base_s=base_s, max_s=max_s)
    outage_s = 3.0
    stack = Stack(
        tmp_path, engine_env={"COOP_BACKOFF_BASE_S": str(base_s), "COOP_BACKOFF_MAX_S": str(max_s)}
    )
    try:
        # The door will listen on <folder>/door.sock, where the notifier looks by default.
        stack.notifier.start()
        stack.started.append(stack.notifier)
        done = coop("notify", "written while the door is down", env=stack.env(), inherit=False)
        assert done.returncode == 0, done.stderr

        def tried(times: int) -> dict[str, object] | None:
            rows = _outbox(stack.coop_db)
            row = rows.get(min(rows)) if rows else None
            return row if row is not None and int(str(row["attempts"])) >= times else None

        wait_until_sync(lambda: tried(1), timeout_s=30, what="a refused try while down")
        # What is asserted is the outage's length: let three looks pass.
        time.sleep(outage_s)
        row = tried(1)
        assert row is not None
        # Tried once: what the growing backoff would wait after three tries is past the bound.
        assert int(str(row["attempts"])) == 1
        assert backoff_s(3, policy, 0.0) > 1.5 * BACK_WITHIN_S
        assert row["state"] == "pending"

        stack.start_door()
        listening = time.monotonic()
        wait_until_sync(
            lambda: _chief_lines(stack.chief_db) == ["written while the door is down"],
            timeout_s=BACK_WITHIN_S,
            what="the row in the Chief after the door came back",
        )
        print(f"in the Chief {time.monotonic() - listening:.2f}s after the door listened")
        assert "the door is not running" in str(row["last_error"]), row["last_error"]
        # The outage is told when it begins and when it ends, not once per refused try.
        back = stack.notifier.wait_event("notifier.door.reachable", timeout_s=BACK_WITHIN_S)
        assert back["tries"] >= 2  # the refused try and the looks since
        down = stack.notifier.events("notifier.door.unreachable")
        assert len(down) == 1, down
        assert stack.notifier.events("outbox.deferred") == []
        assert len(stack.notifier.events("worker.lock.acquired")) <= 2
    finally:
        stack.stop()
        stack.close()
