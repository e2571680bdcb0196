"""The door's paced Telegram queue under a flood, and a quiet system's latency.

    .venv/bin/python bench/bench_flood.py [--backlog 1000] [--quiet-rows 40] [--quiet-rate 0.8]

The whole stack: `python -m engine serve` (its notifier daemon), `chief serve`, and the Telegram
emulator with `--flood-limits` (Telegram's: ~1/s per chat with a burst of 3, 30/s overall).
Figures printed, never asserted:

1. flood: `--backlog` rows committed one per transaction with the daemon not kicked, then one
   kick: drain time to the Chief (kick -> last line landed), then to Telegram (kick -> last
   message), Telegram messages, 429s (target 0), and commit -> Chief landed p50/p99;
2. quiet: `--quiet-rows` rows committed one at a time at `--quiet-rate` rows/s (at most one a
   second: the sender's own bucket is a token every 1.1 s), each commit kicking the daemon as a
   `coop` verb does: commit -> emulator and commit -> Chief landed, p50/p99 (targets 10 / 5 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import benchkit as kit
from benchkit import Stack

from engine import kick as engine_kick
from engine import store as engine_store
from engine.outbox import enqueue

DIGEST_SEPARATOR = "\n\n"


def rung_texts(log: Path) -> dict[str, float]:
    """text -> receipt time of every row text the emulator received, digests read back."""
    found: dict[str, float] = {}
    if not log.exists():
        return found
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        text, at = record["text"], float(record["received_at"])
        head, _, rest = text.partition(DIGEST_SEPARATOR)
        parts = rest.split(DIGEST_SEPARATOR) if head.endswith(" updates") and rest else [text]
        for part in parts:
            found.setdefault(part, at)
    return found


def messages(log: Path) -> int:
    """Telegram messages the emulator received (one JSON line each; a digest is one)."""
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.strip())


def too_many_requests(stack: Stack) -> int:
    return int(stack.telegram_calls()["too_many_requests"])


def show(label: str, samples: list[float]) -> None:
    print(
        f"  {label:<26} p50 {statistics.median(samples):8.2f} ms   p99"
        f" {kit.percentile(samples, 99):8.2f} ms   max {max(samples):8.2f} ms   ({len(samples)})"
    )


def flood(stack: Stack, rows: int) -> None:
    texts = [f"flood row {n:05d}: todo #{n} done, the basil watered" for n in range(rows)]
    chief_db = stack.chief_db
    already = kit.chief_lines(chief_db)
    too_many_before = too_many_requests(stack)
    sent_before = messages(stack.receipt_log)
    committed = kit.commit_rows(stack.coop_db, texts, kick=False)
    kicked = time.time()
    engine_kick.kick(stack.coop_db, mode="datagram")
    landed = kit.wait_chief_receipts(
        chief_db, already + rows, max(120.0, rows / 5), f"{rows} lines in the Chief"
    )
    kit.wait_for(
        lambda: set(texts) <= set(rung_texts(stack.receipt_log)),
        max(300.0, rows),
        "every row rung",
        poll_s=0.2,
    )
    rung = rung_texts(stack.receipt_log)
    chief_s = max(landed[t] for t in texts) - kicked
    telegram_s = max(rung[t] for t in texts) - kicked
    print(f"flood: a {rows}-row backlog, one kick")
    print(f"  drain to the Chief     {chief_s:7.2f} s  ({rows / chief_s:.0f} rows/s)")
    print(f"  drain to Telegram      {telegram_s:7.2f} s")
    sent = messages(stack.receipt_log) - sent_before
    too_many = too_many_requests(stack) - too_many_before
    print(f"  Telegram messages      {sent:7d}  (429s: {too_many})")
    show("commit -> Chief landed", kit.latencies_ms(committed, landed))


def quiet(stack: Stack, rows: int, rate: float) -> None:
    conn = engine_store.open_connection(stack.coop_db)

    def produce(n: int) -> str:
        text = f"quiet row {n}: todo #{n} done"
        with engine_store.write(conn):
            enqueue(conn, "note", text)
        engine_kick.kick(stack.coop_db, mode="datagram")
        return text

    before = messages(stack.receipt_log)
    try:
        committed = kit.paced(rate, rows, produce)
    finally:
        conn.close()
    landed = kit.wait_chief_receipts(stack.chief_db, kit.chief_lines(stack.chief_db), 30, "lines")
    kit.wait_for(
        lambda: set(committed) <= set(rung_texts(stack.receipt_log)), 60.0, "quiet rows", 0.05
    )
    rung = rung_texts(stack.receipt_log)
    print(f"quiet: {rows} rows at {rate:g} rows/s, each commit kicking the daemon")
    show("commit -> emulator", kit.latencies_ms(committed, rung))
    show("commit -> Chief landed", kit.latencies_ms(committed, landed))
    print(f"  Telegram messages      {messages(stack.receipt_log) - before:7d} for {rows} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=1000, help="flood rows")
    parser.add_argument("--quiet-rows", type=int, default=40, help="rows one at a time")
    parser.add_argument("--quiet-rate", type=float, default=0.8, help="rows/s, at most 1")
    parser.add_argument(
        "--no-flood-limits",
        action="store_true",
        help="the emulator without --flood-limits (an older checkout's has none); 0 --backlog",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coop-bench-flood-") as tmp:
        flood_args = () if args.no_flood_limits else ("--flood-limits",)
        stack = Stack(Path(tmp), emulator_args=flood_args)
        try:
            stack.start_door()
            engine_store.open_connection(stack.coop_db).close()
            stack.start_engine()
            limits = "without" if args.no_flood_limits else "with"
            print(f"stack: {stack.label}, emulator {limits} --flood-limits; {os.cpu_count()} CPUs")
            quiet(stack, args.quiet_rows, min(args.quiet_rate, 1.0))
            if args.backlog > 0 and not args.no_flood_limits:
                flood(stack, args.backlog)
        finally:
            stack.stop()


if __name__ == "__main__":
    kit.run(main)
