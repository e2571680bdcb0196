"""Benchmark: notify requests through the door, one at a time (as the engine's one worker
sends them): httpx -> door on uvicorn -> report() into chief.db -> PTB -> the Bot API emulator
-> sent mark. Prints rows/s and p50/p99 latency for new rows and for already-sent repeats.

    .venv/bin/python bench/bench_door.py [ROWS] [--time-limit-s S]

The door answers once the Telegram entry is queued; its sender task rings the queue paced, with
what piled up carried as one digest. So the run ends by waiting (bounded) for the door's
Telegram queue to empty, and checks that every entry reached the emulator, alone or in a digest.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chief.phone.pacing import DIGEST_SEPARATOR
from tests.support.door import DoorStack, body, door_stack
from tests.support.waiting import wait_until


def _figures(label: str, samples_s: list[float]) -> None:
    samples_ms = sorted(s * 1000 for s in samples_s)
    p99 = samples_ms[max(0, int(len(samples_ms) * 0.99) - 1)]
    print(
        f"{label:<14} {len(samples_ms) / sum(samples_s):8.0f} rows/s   "
        f"p50 {statistics.median(samples_ms):6.2f} ms   p99 {p99:6.2f} ms"
    )


async def main(rows: int, time_limit_s: float) -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    with tempfile.TemporaryDirectory() as folder:
        async with door_stack(Path(folder)) as stack:
            for label in ("new rows", "already sent"):
                samples = []
                for index in range(rows):
                    began = time.perf_counter()
                    response = await stack.notify(body(f"bench-{index}", text=f"row {index}"))
                    samples.append(time.perf_counter() - began)
                    assert response.status_code == 200, response.text
                _figures(label, samples)
            samples = []
            for index in range(rows):
                began = time.perf_counter()
                await stack.notify(body(None, text=f"plain {index}"))
                samples.append(time.perf_counter() - began)
            _figures("telegram only", samples)
            await _all_rung(stack, rows, time_limit_s)


async def _all_rung(stack: DoorStack, rows: int, time_limit_s: float) -> None:
    """Wait for the door's Telegram queue to empty; then every entry rang exactly once."""

    async def queue_empty() -> bool:
        return (await stack.status()).json()["telegram_queue"]["depth"] == 0

    try:
        await wait_until(queue_empty, timeout_s=time_limit_s, what="the door's Telegram queue")
    except AssertionError as exc:
        raise SystemExit(f"bench: {exc}") from None
    entries = [part for text in stack.emulator.texts() for part in text.split(DIGEST_SEPARATOR)]
    expected = [f"row {i}" for i in range(rows)] + [f"plain {i}" for i in range(rows)]
    missing = [text for text in expected if entries.count(text) != 1]
    if missing:
        raise SystemExit(f"bench: {len(missing)} entries did not ring once (first: {missing[0]!r})")
    print(f"rang {2 * rows} entries in {len(stack.emulator.messages)} Telegram messages")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="?", type=int, default=300, help="rows per pass")
    parser.add_argument("--time-limit-s", type=float, default=120.0, help="bound on the ringing")
    args = parser.parse_args()
    anyio.run(main, args.rows, args.time_limit_s)
