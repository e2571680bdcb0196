"""Benchmark report(): how many reports land per second with no turn held, and the time from
the report() call to landed (report(wait=None) returns when its row has landed).

    .venv/bin/python bench/bench_chief_report.py [--count 2000] [--concurrency 32]

Runs on a fresh chief.db in a temporary folder (WAL, synchronous=FULL, as in production).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chief.config import ChiefConfig
from chief.conversation import Chief

MAX_COUNT = 100_000


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _timed_report(chief: Chief, n: int, prefix: str, latencies_ms: list[float]) -> None:
    started = time.perf_counter()
    landed = await chief.report(f"bench line {n}", f"{prefix}:{n}", wait=None)
    latencies_ms.append((time.perf_counter() - started) * 1000)
    assert landed is not None


async def _sequential(chief: Chief, count: int) -> tuple[float, list[float]]:
    latencies_ms: list[float] = []
    started = time.perf_counter()
    for n in range(count):
        await _timed_report(chief, n, "coop-notify", latencies_ms)
    return time.perf_counter() - started, latencies_ms


async def _concurrent(chief: Chief, count: int, concurrency: int) -> tuple[float, list[float]]:
    latencies_ms: list[float] = []
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(n: int) -> None:
        async with limiter:
            await _timed_report(chief, n, "cron", latencies_ms)

    started = time.perf_counter()
    async with anyio.create_task_group() as tasks:
        for n in range(count):
            tasks.start_soon(one, n)
    return time.perf_counter() - started, latencies_ms


def _print(label: str, elapsed_s: float, latencies_ms: list[float]) -> None:
    print(
        f"{label:<28} {len(latencies_ms) / elapsed_s:8.0f} reports/s landed   "
        f"report()->landed p50 {statistics.median(latencies_ms):6.2f} ms   "
        f"p99 {_percentile(latencies_ms, 0.99):6.2f} ms"
    )


async def main(count: int, concurrency: int) -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory() as folder:
        config = ChiefConfig(db_path=Path(folder) / "chief.db", owner="bench")
        async with Chief.open(config) as chief:
            elapsed_s, latencies_ms = await _sequential(chief, count)
            _print("sequential (1 in flight)", elapsed_s, latencies_ms)
            elapsed_s, latencies_ms = await _concurrent(chief, count, concurrency)
            _print(f"concurrent ({concurrency} in flight)", elapsed_s, latencies_ms)
            assert await chief.undelivered_count() == 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    options = parser.parse_args()
    if not 1 <= options.count <= MAX_COUNT or options.concurrency < 1:
        parser.error(f"--count must be 1..{MAX_COUNT} and --concurrency at least 1")
    anyio.run(main, options.count, options.concurrency)
