"""The door's memory with and without the fallback channel configured (issue 35, rung 3).

    .venv/bin/python bench/bench_fallback_memory.py [--rounds 3] [--settle-s 3]

Each round starts, side by side against one Telegram emulator, two `chief serve` processes over
folders of their own: one without `CHIEF_FALLBACK_URLS`, one with a `mailto://` fallback URL
(Apprise is imported only then; nothing is sent: the URL is checked and held, no outage
happens). After `--settle-s` it prints each door's VmRSS and VmHWM from /proc/PID/status and the
difference, then stops both. Figures, never asserts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import benchkit as kit
from benchkit import Service, Stack

from tests.support.procs import write_key
from tests.support.stack import SERVICE_KEY, stack_env

FALLBACK_URL = "mailto://coop@localhost?smtp=127.0.0.1&port=2525&mode=insecure&to=o@example.org"


def with_fallback(stack: Stack, folder: Path) -> Service:
    """A second door, its fallback configured, on the stack's emulator and its own socket."""
    folder.mkdir()
    write_key(folder / "service.key", SERVICE_KEY)
    env = stack_env(
        folder,
        TELEGRAM_API_BASE=f"{stack.emulator.url}/bot",
        CHIEF_METRICS_PORT="off",
        CHIEF_FALLBACK_URLS=FALLBACK_URL,
    )
    door = stack.add(
        Service("door-fallback", ["chief", "serve"], folder, "door.listening", env,
                takes_port=False)
    )  # fmt: skip
    door.wait_event("door.fallback_configured", "the fallback configured")
    return door


def one_round(settle_s: float) -> tuple[dict[str, int], dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="bench-fallback-") as tmp:
        folder = Path(tmp)
        stack = Stack(folder)
        try:
            stack.start_door()
            stack.door.wait_event("door.started", "the door without a fallback")
            other = with_fallback(stack, folder / "with")
            time.sleep(settle_s)  # the measured state: both idle, their start behind them
            return stack.door.memory_kb(), other.memory_kb()
        finally:
            stack.stop()
            stack.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle-s", type=float, default=3.0)
    args = parser.parse_args()
    print("door VmRSS / VmHWM in MB: without the fallback | with it | difference of VmRSS")
    for number in range(1, max(1, args.rounds) + 1):
        without, with_it = one_round(max(0.0, args.settle_s))
        print(
            f"  round {number}: {without['VmRSS'] / 1024:6.1f} / {without['VmHWM'] / 1024:6.1f}"
            f"  |  {with_it['VmRSS'] / 1024:6.1f} / {with_it['VmHWM'] / 1024:6.1f}"
            f"  |  +{(with_it['VmRSS'] - without['VmRSS']) / 1024:.1f}"
        )


if __name__ == "__main__":
    kit.run(main)
