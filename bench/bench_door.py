"""Benchmark: notify requests through the door, one at a time (as the engine's one worker
sends them): httpx -> door on uvicorn -> report() into chief.db -> PTB -> the Bot API emulator
-> sent mark. Prints rows/s and p50/p99 latency for new rows and for already-sent repeats.

    .venv/bin/python bench/bench_door.py [ROWS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.door.door_env import body, door_stack


def _figures(label: str, samples_s: list[float]) -> None:
    samples_ms = sorted(s * 1000 for s in samples_s)
    p99 = samples_ms[max(0, int(len(samples_ms) * 0.99) - 1)]
    print(
        f"{label:<14} {len(samples_ms) / sum(samples_s):8.0f} rows/s   "
        f"p50 {statistics.median(samples_ms):6.2f} ms   p99 {p99:6.2f} ms"
    )


async def main(rows: int) -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))
    with tempfile.TemporaryDirectory() as folder:
        async with door_stack(Path(folder)) as stack:
            for label, start in (("new rows", 0), ("already sent", 0)):
                samples = []
                for index in range(start, start + rows):
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
            assert len(stack.emulator.messages) == 2 * rows


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 300)
