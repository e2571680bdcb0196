"""Benchmark: how soon the ledger decides a request once its deadline comes, and what pending
deadlines cost an idle `coop serve`.

1. Latency. `coop serve` (its notifier daemon) and the minimal test door, real processes. N
   requests to the owner, each with a deadline of `--deadline-s` and a default, filed one every
   `--spacing-s` (so each deadline is met alone, as in life); for each, the time from its
   deadline to its close (the close's `closed_at` in coop.db, stamped in the deciding
   transaction): p50, p99 and the worst.
2. Idle cost. Two `coop serve` stacks side by side in the same window, one with `--pending`
   requests whose deadlines lie a day ahead, one with none: each service's wakeups (voluntary
   context switches of every thread, /proc/PID/task/*/status) and CPU (/proc/PID/stat). The
   daemon sleeps until the earliest deadline, never polls, so the two should read alike.

    .venv/bin/python bench/bench_deadlines.py [--count 50] [--pending 100] [--window-s 30]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path

import benchkit as kit
from bench_phone_idle import wakeups
from benchkit import Service, Stack

from engine import ledger

SETTLE_S = 3.0  # after start: imports done, the first drain and sleep begun


def start(folder: Path) -> Stack:
    stack = Stack(folder)
    stack.start_test_door()
    stack.start_engine()
    return stack


def file_requests(db: Path, count: int, deadline: str, spacing_s: float = 0.0) -> list[int]:
    """`count` requests to the owner with `deadline` and a default, one every `spacing_s`."""
    ids = []
    for n in range(count):
        answer = ledger.add_request(
            f"deadline {n}",
            actor="bench",
            addressed_to="owner",
            choices="approve,decline",
            deadline=deadline,
            default="decline",
            db=str(db),
        )
        ids.append(answer["request"]["id"])
        if spacing_s:
            time.sleep(spacing_s)  # pacing the producer, not waiting on a result
    return ids


def lateness_ms(db: Path, ids: list[int], timeout_s: float) -> list[float]:
    """From each request's deadline to its close, once all are closed."""
    marks = ",".join("?" for _ in ids)

    def rows() -> list[tuple[float, str | None]]:
        with closing(sqlite3.connect(db)) as conn:
            return conn.execute(
                f"SELECT deadline_at, closed_at FROM requests WHERE id IN ({marks})", ids
            ).fetchall()

    kit.wait_for(lambda: all(c for _, c in rows()), timeout_s, "every deadline applied")
    from datetime import datetime

    return [
        (datetime.fromisoformat(closed).timestamp() - deadline_at) * 1000
        for deadline_at, closed in rows()
        if closed is not None
    ]


def latency(folder: Path, count: int, deadline_s: int, spacing_s: float) -> list[float]:
    stack = start(folder)
    try:
        ids = file_requests(stack.coop_db, count, f"{deadline_s}s", spacing_s)
        return lateness_ms(stack.coop_db, ids, deadline_s + count * spacing_s + 30)
    finally:
        stack.stop()
        stack.close()


def sample(parts: list[Service]) -> dict[str, tuple[float, int]]:
    return {part.name: (part.cpu_s(), wakeups(part.pid)) for part in parts}


def idle(folder: Path, pending: int, window_s: float, settle_s: float = SETTLE_S) -> list[str]:
    """The same idle window for a stack with `pending` deadlines a day ahead and one with none."""
    stacks: dict[str, Stack] = {}
    try:
        for label, count in ((f"{pending} pending", pending), ("none", 0)):
            (folder / str(count)).mkdir()
            stacks[label] = start(folder / str(count))
            file_requests(stacks[label].coop_db, count, "1d")
        time.sleep(settle_s)  # let every part finish starting before the window opens
        parts = {label: stack.running() for label, stack in stacks.items()}
        before = {label: sample(found) for label, found in parts.items()}
        began = time.monotonic()
        time.sleep(window_s)  # the window itself: idle services, nothing to wait for
        elapsed_s = time.monotonic() - began
        after = {label: sample(found) for label, found in parts.items()}
    finally:
        for stack in stacks.values():
            stack.close()
    lines = [f"idle window {elapsed_s:.1f} s", "deadlines     process     wakeups/s   CPU ms/min"]
    for label, found in after.items():
        for name, (cpu, woke) in found.items():
            cpu0, woke0 = before[label][name]
            lines.append(
                f"{label:<13} {name:<10} {(woke - woke0) / elapsed_s:>10.2f}"
                f"   {(cpu - cpu0) * 60_000 / elapsed_s:>10.1f}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50, help="deadlines timed")
    parser.add_argument("--deadline-s", type=int, default=1)
    parser.add_argument("--spacing-s", type=float, default=0.2)
    parser.add_argument("--pending", type=int, default=100, help="deadlines pending when idle")
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=SETTLE_S,
        help="the pause before the window opens (a smoke run: 0)",
    )
    args = parser.parse_args()
    # Producers here wake the daemon by datagram only: no one-shot drainer outlives the bench.
    os.environ["COOP_KICK"] = "datagram"
    os.environ.pop("COOP_OWNER_FILE", None)
    with tempfile.TemporaryDirectory(prefix="bench-deadlines-") as raw:
        (Path(raw) / "latency").mkdir()
        late = latency(Path(raw) / "latency", args.count, args.deadline_s, args.spacing_s)
        print(
            f"deadline -> close over {len(late)} deadlines (coop serve, test door):"
            f" p50 {kit.percentile(late, 50):.1f} ms, p99 {kit.percentile(late, 99):.1f} ms,"
            f" worst {max(late):.1f} ms",
            flush=True,
        )
        (Path(raw) / "idle").mkdir()
        for line in idle(Path(raw) / "idle", args.pending, args.window_s, args.settle_s):
            print(line, flush=True)


if __name__ == "__main__":
    kit.run(main)
