"""Benchmark the notification pipeline on loopback, with real processes.

    .venv/bin/python bench/bench_pipeline.py [--backlog 2000] [--rate 50] [--rate-rows 300]

The stack: an engine database (a temp folder), the notifier daemon (`python -m notifier run`),
the Chief's door (`python -m chief serve`) and the Telegram emulator
(`python -m chief telegram-emulator`). It prints

1. backlog: rows/s for a 2,000-row backlog committed at once, from the commit to the last
   message the emulator received, and CPU milliseconds per delivered row for each process;
2. latency: p50/p99 from each row's commit to the emulator receiving it, rows committed one
   per transaction at `--rate` rows/s (each commit kicks the daemon, as a `coop` verb does).

If the Chief's door cannot start here, the same figures are measured against a minimal test
door (a Starlette app on uvicorn, in its own process) and labelled so: the notifier's part
of the pipeline alone. Figures are printed, never asserted (the targets: p99 < 10 ms at 50
rows/s, a backlog drain of >= 600 rows/s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import benchkit as kit
from benchkit import DRAIN_TIMEOUT_S, LineCounter, Stack, receipts, wait_for

from engine import direct
from engine import kick as engine_kick
from engine import store as engine_store
from engine.outbox import enqueue


def bench_backlog(stack: Stack, rows: int) -> None:
    before = stack.cpu()
    start = time.time()
    with direct.connection(stack.coop_db) as conn, engine_store.write(conn):
        for n in range(rows):
            enqueue(conn, "note", f"backlog {n}")
    committed = time.time()
    engine_kick.kick(stack.coop_db, mode="datagram")
    received = LineCounter(stack.receipt_log)
    wait_for(lambda: received() >= rows, DRAIN_TIMEOUT_S, f"{rows} rows at the far end")
    got = receipts(stack.receipt_log)
    last = max(got[f"backlog {n}"] for n in range(rows))
    after = stack.cpu()
    print(f"backlog: {rows} rows committed in {committed - start:.3f}s")
    print(f"  end-to-end drain: {rows / (last - committed):.0f} rows/s ({last - committed:.2f}s)")
    for name in after:
        used_ms = (after[name] - before.get(name, 0.0)) * 1000
        print(f"  CPU {name:>9}: {used_ms / rows:.2f} ms per delivered row")
    print(
        f"  CPU total    : {sum(after[n] - before.get(n, 0.0) for n in after) * 1000 / rows:.2f}"
        " ms per delivered row"
    )


def bench_latency(stack: Stack, rate: float, rows: int) -> None:
    committed: dict[str, float] = {}
    interval_s = 1.0 / rate
    received = LineCounter(stack.receipt_log)
    already = received()
    conn = engine_store.open_connection(stack.coop_db)
    try:
        next_at = time.monotonic()
        for n in range(rows):
            text = f"latency {n}"
            with engine_store.write(conn):
                enqueue(conn, "note", text)
            committed[text] = time.time()
            engine_kick.kick(stack.coop_db, mode="datagram")
            next_at += interval_s
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing the producer, not synchronising
    finally:
        conn.close()
    wait_for(lambda: received() >= already + rows, DRAIN_TIMEOUT_S, "the last latency row")
    got = receipts(stack.receipt_log)
    lat_ms = sorted((got[t] - c) * 1000 for t, c in committed.items() if t in got)
    p50 = statistics.median(lat_ms)
    p99 = lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))]
    print(f"latency at {rate:g} rows/s ({len(lat_ms)} rows, commit -> far end):")
    print(f"  p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {lat_ms[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--rate-rows", type=int, default=300)
    parser.add_argument("--test-door", action="store_true", help="skip chief serve")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coop-bench-") as tmp:
        stack = Stack(Path(tmp))
        try:
            engine_store.open_connection(stack.coop_db).close()
            kit.start_door(stack, test_door=args.test_door)
            stack.start_notifier()
            print(f"stack: {stack.label}; {os.cpu_count()} CPUs")
            bench_backlog(stack, args.backlog)
            bench_latency(stack, args.rate, args.rate_rows)
        finally:
            stack.stop()


if __name__ == "__main__":
    kit.run(main)
