"""The hammer: producer processes commit rows in bursts and kick one-shot drainers (real
processes) that win or lose the worker lock, drain and exit, in batches (the default). No row
may be stranded or sent twice, the door sees them in FIFO order, and the lock ends free.
Repeated five times."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine import direct
from engine import store as engine_store
from tests.e2e.notifier.notifier_processes import REPO, log_events, notifier_env
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

PRODUCERS = 4
BURSTS = 4
BURST_ROWS = 125
TOTAL_ROWS = PRODUCERS * BURSTS * BURST_ROWS  # 2,000

# One producer: each burst is one transaction, then the kick a `coop` verb does after commit.
PRODUCER = """
import json, sys
from pathlib import Path
from engine import direct, kick, store
from engine.outbox import enqueue
db, tag, bursts, rows = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
kicks = []
for b in range(bursts):
    with direct.connection(db) as conn, store.write(conn):
        for n in range(rows):
            enqueue(conn, "note", f"{tag} burst {b} row {n}")
    kicks.append(kick.kick(db))
print(json.dumps(kicks))
"""


def _delivered(db_path: Path) -> int:
    with direct.connection(db_path) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM coop_outbox WHERE state = 'delivered'"
        ).fetchone()
    return int(count)


@pytest.mark.slow
@pytest.mark.parametrize("run", range(5))
def test_hammer_every_row_delivered_exactly_once_and_the_lock_ends_free(
    tmp_path: Path, run: int
) -> None:
    db_path = tmp_path / "coop.db"
    engine_store.open_connection(db_path).close()
    drainer_log = Path(str(db_path) + ".drainer.log")
    door = TestDoor(batch_route=True)  # the drainers send batches (COOP_BATCH_MAX's default)
    with serve_door_in_thread(door, tmp_path / "door.sock") as door_socket:
        env = notifier_env(tmp_path, db_path, door_socket, COOP_KICK="auto")
        producers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    PRODUCER,
                    str(db_path),
                    f"p{n}",
                    str(BURSTS),
                    str(BURST_ROWS),
                ],
                env=env,
                cwd=REPO,
                stdout=subprocess.PIPE,
            )
            for n in range(PRODUCERS)
        ]
        kicks: list[str] = []
        for proc in producers:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0
            kicks += json.loads(out)
        assert kicks == ["spawned"] * PRODUCERS * BURSTS  # no daemon: every kick spawned
        # Polls the door's memory, not the database: the test must not compete for the GIL
        # with the door it serves, nor for the write lock with the drainer.
        wait_until_sync(
            lambda: len(door.received) >= TOTAL_ROWS, timeout_s=90, what="every row at the door"
        )
        # Every spawned drainer has finished (won or lost, drained, exited).
        wait_until_sync(
            lambda: (
                sum(e.get("event") == "notifier.exit" for e in log_events(drainer_log))
                == len(kicks)
            ),
            timeout_s=60,
            what="every drainer exited",
        )
    events = log_events(drainer_log)
    exits = Counter(str(e["outcome"]) for e in events if e.get("event") == "notifier.exit")
    with direct.connection(db_path) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM coop_outbox ORDER BY id")]
        assert conn.execute("SELECT count(*) FROM worker_lock").fetchone()[0] == 0
    seen = door.ids(db_path)
    resent = door.resent(db_path)
    assert _delivered(db_path) == TOTAL_ROWS
    print(f"hammer run {run}: drainers {dict(exits)}, re-sent {len(resent)}")
    assert len(ids) == TOTAL_ROWS
    assert resent == {}
    assert seen == ids  # exactly once each, in FIFO order across every drainer
    assert door.batches > 0  # the batch route carried them, not the single one
    assert not [e for e in events if "raw" in e or e.get("level") in ("error", "critical")]
    assert exits["released"] >= 1
