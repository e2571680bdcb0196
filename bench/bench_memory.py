"""Peak memory of the engine service and the Chief's door as rows flow through them.

    .venv/bin/python bench/bench_memory.py [--rows 100000] [--batch 1000] [--time-limit-s 2400]

The full stack in a temp folder: `python -m engine serve` (owner endpoint + notifier daemon),
`python -m chief serve` (the door) and the Telegram emulator. Rows are written to coop.db
`--batch` per transaction, each batch followed by a kick; the next batch is written once the
emulator holds all but one batch of what was written, so the backlog stays under two batches
and the run measures rows delivered, not rows waiting.

At start and at each checkpoint (1k, 10k, 25k, 50k, 75k, 100k rows received by the emulator)
it prints VmHWM (peak resident set) and VmRSS from /proc/PID/status for each process. The run
stops at `--rows` or at `--time-limit-s`, whichever comes first, and says how many rows were
delivered: it extrapolates nothing. The emulator keeps every message in memory by design (it
is a development stand-in), so its figure is printed for completeness, not as a product figure.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import benchkit as kit
from benchkit import Stack

from engine import direct
from engine import kick as engine_kick
from engine import store as engine_store
from engine.outbox import enqueue

CHECKPOINTS = (1_000, 10_000, 25_000, 50_000, 75_000, 100_000)
POLL_S = 0.05
WATCHED = ("engine", "door", "test-door", "emulator")  # the test door, if chief failed


def memory_line(stack: Stack, label: str, started: float, delivered: int) -> str:
    parts = []
    for part in stack.started:
        name = part.name
        if name not in WATCHED:
            continue
        if not part.running:
            parts.append(f"{name} gone")
            continue
        mem = part.memory_kb()
        parts.append(f"{name} {mem['VmHWM'] / 1024:6.1f}/{mem['VmRSS'] / 1024:6.1f}")
    elapsed = time.monotonic() - started
    rate = delivered / elapsed if elapsed > 0 and delivered else 0.0
    return f"  {label:>16}  {elapsed:7.1f}s {rate:6.1f} rows/s   " + "   ".join(parts)


def write_batch(db: Path, first: int, count: int) -> None:
    with direct.connection(db) as conn, engine_store.write(conn):
        for n in range(first, first + count):
            enqueue(conn, "note", f"memory {n}: a line the owner reads on the phone")
    engine_kick.kick(db, mode="datagram")


def run(stack: Stack, rows: int, batch: int, time_limit_s: float) -> None:
    counter = kit.LineCounter(stack.receipt_log)
    started = time.monotonic()
    deadline = started + time_limit_s
    print("  VmHWM/VmRSS in MB per process")
    print(memory_line(stack, "at start", started, 0))
    written = 0
    checkpoints = [c for c in CHECKPOINTS if c < rows] + [rows]
    while counter() < rows and time.monotonic() < deadline:
        if written < rows and counter() >= written - batch:
            count = min(batch, rows - written)
            write_batch(stack.coop_db, written, count)
            written += count
        while checkpoints and counter() >= checkpoints[0]:
            label = f"{checkpoints.pop(0):,} rows"
            print(memory_line(stack, label, started, counter()), flush=True)
        if any(not p.running for p in stack.started if p.name in WATCHED):
            print("  a process exited; see the logs in", stack.folder)
            break
        time.sleep(POLL_S)  # pacing the watcher, not synchronising
    delivered = counter()
    print(memory_line(stack, f"end {delivered:,}", started, delivered))
    if delivered < rows:
        print(
            f"  stopped at the time limit ({time_limit_s:g}s): {delivered:,} of {rows:,} rows"
            f" delivered ({written:,} written); the figures above are for those rows only"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="rows per transaction")
    parser.add_argument("--time-limit-s", type=float, default=2400.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coop-bench-memory-") as tmp:
        stack = Stack(Path(tmp))
        try:
            engine_store.open_connection(stack.coop_db).close()
            kit.start_door(stack)
            stack.start_engine()
            print(f"stack: {stack.label}; {os.cpu_count()} CPUs; {args.rows:,} rows")
            run(stack, args.rows, args.batch, args.time_limit_s)
        finally:
            stack.stop()


if __name__ == "__main__":
    kit.run(main)
