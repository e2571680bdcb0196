"""Drain cost as the backlog grows: does the notifier's rows/s stay flat at 1k, 10k, 100k rows?

    .venv/bin/python bench/bench_backlog.py [--sizes 1000,10000,100000]
                                            [--full-stack-rows 1000] [--time-limit-s 600]

For each size B, in a fresh folder: B pending rows are written to coop.db first (5,000 per
transaction, no kick), then `python -m engine serve` starts and its notifier daemon drains
them (a start resumes pending rows). What is measured:

1. against the minimal test door (`tests.support.loopback_door`: one process, the door's
   contract, no Chief, no Telegram), the WHOLE drain of each backlog: rows/s between the
   first and the last receipt of all B rows, and each process's CPU ms per row over the same
   window (the figure other work on the machine disturbs least). This isolates the queue's
   own cost (the head lookup, the claim, the mark) from the door's, and a cost that grows as
   the backlog shrinks or as coop.db fills with delivered rows shows in the whole drain, not
   in its first rows;
2. over the full stack (chief serve + Telegram emulator), a backlog of `--full-stack-rows`
   drained completely, the same two figures.

Printed, never asserted. Every wait is bounded by `--time-limit-s`.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import benchkit as kit
from benchkit import Stack

from engine import store as engine_store

# The whole drain's wait polls the receipt log this often: the rate comes from the receipts'
# own times, so a coarse poll costs no precision and leaves the CPU to the processes measured.
WHOLE_DRAIN_POLL_S = 0.1


def drain(size: int, *, full_stack: bool, time_limit_s: float) -> None:
    """Fill a backlog of `size` rows, start the engine service, time the whole drain."""
    with tempfile.TemporaryDirectory(prefix="coop-bench-backlog-") as tmp:
        stack = Stack(Path(tmp))
        try:
            engine_store.open_connection(stack.coop_db).close()
            kit.start_door(stack, test_door=not full_stack)
            fill_s = kit.fill_backlog(stack.coop_db, "backlog", size)
            db_mb = stack.coop_db.stat().st_size / 1e6
            stack.start_engine()
            counter = kit.LineCounter(stack.receipt_log)
            kit.wait_for(lambda: counter() >= 1, time_limit_s, "the first receipt")
            cpu_first = stack.cpu()
            kit.wait_for(
                lambda: counter() >= size,
                time_limit_s,
                f"all {size:,} receipts",
                poll_s=WHOLE_DRAIN_POLL_S,
            )
            cpu_last = stack.cpu()
            got = kit.receipts(stack.receipt_log)
            times = [got[f"backlog {n}"] for n in range(size) if f"backlog {n}" in got]
            if len(times) < size:
                raise SystemExit(f"bench: {size - len(times)} of {size:,} rows never arrived")
            rate = kit.drain_rate(times)
            drain_s = max(times) - min(times)
            cpu = kit.cpu_ms_per_row(cpu_first, cpu_last, max(1, size - 1))
            where = "full stack " if full_stack else "test door  "
            print(
                f"  {where} backlog {size:>7,}: whole drain {rate:7.1f} rows/s in {drain_s:.1f}s"
                f"   (written in {fill_s:.1f}s, coop.db {db_mb:.1f} MB)"
            )
            print(f"{'':15}CPU ms/row: {cpu}")
        finally:
            stack.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="backlog sizes, comma-sep")
    parser.add_argument("--full-stack-rows", type=int, default=1000, help="0 skips it")
    parser.add_argument("--time-limit-s", type=float, default=600.0, help="bound on each wait")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(
        f"drain rate by backlog size (first -> last receipt of the whole backlog);"
        f" {os.cpu_count()} CPUs"
    )
    for size in sizes:
        drain(size, full_stack=False, time_limit_s=args.time_limit_s)
    if args.full_stack_rows > 0:
        drain(args.full_stack_rows, full_stack=True, time_limit_s=args.time_limit_s)


if __name__ == "__main__":
    kit.run(main)
