"""Benchmark: the door's CPU per row, single-row notify against notify-batch, side by side in one
run. `chief serve` and the Telegram emulator run as processes (benchkit's `Stack`); one keep-alive
httpx client posts ROWS rows one per request, then ROWS rows in batches of BATCH, alternating
for ROUNDS rounds. Each phase ends when every row is rung and marked (the door's sent count),
so the Telegram side of each row is inside its phase. CPU is user + system time of each process
from /proc/PID/stat over the phase.

    .venv/bin/python bench/bench_door_batch.py [--rows 400] [--batch 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import benchkit as kit
import httpx
from benchkit import SERVICE_KEY, Stack, wait_for

from tests.support.procs import socket_client

NOTIFY_PATH = "/api/coop/engine/notify"
BATCH_PATH = NOTIFY_PATH + "-batch"
PHASE_TIMEOUT_S = 120.0
CLIENT_TIMEOUT_S = 15.0


def row(outbox_id: str) -> dict[str, str]:
    return {"text": f"bench row {outbox_id}", "kind": "todo.done", "outbox_id": outbox_id}


def sent_count(chief_db: Path) -> int:
    with sqlite3.connect(chief_db, timeout=5) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM coop_notify_sent").fetchone()[0])


def phase(
    stack: Stack, client: httpx.Client, label: str, ids: list[str], batch: int
) -> dict[str, float]:
    """Post `ids` (one per request when `batch` is 1), wait until all are marked sent; the CPU
    ms per row of each process and the wall time."""
    headers = {"X-Coop-Service-Key": SERVICE_KEY}
    chief_db = stack.chief_db
    target = sent_count(chief_db) + len(ids)
    before = stack.cpu()
    began = time.perf_counter()
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        if batch == 1:
            response = client.post(NOTIFY_PATH, json=row(chunk[0]), headers=headers)
        else:
            document = {"items": [row(outbox_id) for outbox_id in chunk]}
            response = client.post(BATCH_PATH, json=document, headers=headers)
        if response.status_code != 200:
            raise SystemExit(f"bench: {label}: the door answered {response.status_code}")
    answered_s = time.perf_counter() - began
    wait_for(lambda: sent_count(chief_db) >= target, PHASE_TIMEOUT_S, f"{label}: every mark")
    after = stack.cpu()
    figures = {name: (after[name] - before[name]) * 1000 / len(ids) for name in before}
    figures["answered_rows_per_s"] = len(ids) / answered_s
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400, help="rows per phase (default 400)")
    parser.add_argument("--batch", type=int, default=8, help="rows per batch (default 8)")
    parser.add_argument("--rounds", type=int, default=3, help="single/batch pairs (default 3)")
    args = parser.parse_args()
    if not (1 <= args.rows <= 100_000 and 2 <= args.batch <= 256 and 1 <= args.rounds <= 20):
        raise SystemExit("bench: --rows 1..100000, --batch 2..256, --rounds 1..20")
    with tempfile.TemporaryDirectory() as folder:
        stack = Stack(Path(folder))
        try:
            stack.start_door()
            results: dict[str, list[dict[str, float]]] = {"single": [], "batch": []}
            with socket_client(stack.door_socket, CLIENT_TIMEOUT_S) as client:  # the door's
                # Warm-up: imports, the Bot's getMe, the first chief.db pages.
                warm_up = [f"warm-{n}" for n in range(min(50, args.rows))]
                phase(stack, client, "warm-up", warm_up, 1)
                for rnd in range(args.rounds):
                    for label, size in (("single", 1), ("batch", args.batch)):
                        ids = [f"{label}-{rnd}-{n}" for n in range(args.rows)]
                        results[label].append(phase(stack, client, label, ids, size))
            print(
                f"door CPU per row, {args.rows} rows a phase, {args.rounds} rounds "
                f"(median; min-max), batch of {args.batch}:"
            )
            for label in ("single", "batch"):
                runs = results[label]
                parts = []
                for name in ("door", "emulator"):
                    values = [run[name] for run in runs]
                    parts.append(
                        f"{name} {statistics.median(values):.3f} ms "
                        f"({min(values):.3f}-{max(values):.3f})"
                    )
                rate = statistics.median(run["answered_rows_per_s"] for run in runs)
                print(f"  {label:<7} {'; '.join(parts)}; answered {rate:.0f} rows/s")
            single = statistics.median(run["door"] for run in results["single"])
            batched = statistics.median(run["door"] for run in results["batch"])
            # A few rows may cost the door under one clock tick: no ratio then, not a crash.
            ratio = f"{batched / single:.2f}" if single > 0 else "n/a (single phase under a tick)"
            print(f"  door CPU per row, batch / single: {ratio}")
        finally:
            stack.stop()


if __name__ == "__main__":
    kit.run(main)
