"""Benchmark: how often each service of an idle stack wakes, and how fast it stops.

The whole stack (the Telegram emulator, the door `chief serve` with its phone's long poll, and
`coop serve` with its notifier daemon), settled, nothing to deliver. Over one fixed window,
each process's wakeups (voluntary context switches summed over every thread,
/proc/PID/task/*/status) and CPU (/proc/PID/stat); then SIGTERM to each, last started first:
the time until it exited, and its exit status.

With `--baseline DIR` (a worktree of another commit, e.g. `git worktree add /tmp/main main`) a
second stack runs that tree's code beside this one, in the same window, so the two compare
under the same load.

    .venv/bin/python bench/bench_idle_wakeups.py [--window-s 30] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import benchkit as kit
from bench_phone_idle import wakeups
from benchkit import Service, Stack

SETTLE_S = 3.0  # after start: imports, getMe, setMyCommands and the first poll are done


def start(folder: Path, tree: Path) -> Stack:
    stack = Stack(folder)
    for part in (stack.emulator, stack.door, stack.engine):
        part.cwd = tree
    stack.start()
    return stack


def sample(parts: list[Service]) -> dict[str, tuple[float, int]]:
    return {part.name: (part.cpu_s(), wakeups(part.pid)) for part in parts}


def stop(stack: Stack) -> dict[str, tuple[float, int]]:
    """(ms from SIGTERM to exit, exit status) of each part, last started first."""
    found = {}
    for part in reversed(stack.running()):
        began = time.monotonic()
        status = part.terminate()
        found[part.name] = ((time.monotonic() - began) * 1000, status)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-s", type=float, default=30.0)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=SETTLE_S,
        help="the pause before the window opens (a smoke run: 0)",
    )
    parser.add_argument("--baseline", type=Path, help="another tree's code, run beside this")
    args = parser.parse_args()
    trees = {"this": kit.REPO}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    stacks: dict[str, Stack] = {}
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as raw:
        try:
            for label, tree in trees.items():
                (Path(raw) / label).mkdir()
                stacks[label] = start(Path(raw) / label, tree)
            time.sleep(args.settle_s)  # let every part finish starting before the window opens
            parts = {label: stack.running() for label, stack in stacks.items()}
            before = {label: sample(found) for label, found in parts.items()}
            began = time.monotonic()
            time.sleep(args.window_s)  # the window itself: idle services, nothing to wait for
            elapsed_s = time.monotonic() - began
            after = {label: sample(found) for label, found in parts.items()}
            stopped = {label: stop(stack) for label, stack in stacks.items()}
        finally:
            for stack in stacks.values():
                stack.close()
    print(f"window {elapsed_s:.1f} s; tree: {', '.join(f'{k}={v}' for k, v in trees.items())}")
    print("tree      process    wakeups/s   CPU ms/min   stop ms   exit")
    for label in stacks:
        for name, (cpu, woke) in after[label].items():
            cpu0, woke0 = before[label][name]
            stop_ms, status = stopped[label][name]
            print(
                f"{label:<9} {name:<9} {(woke - woke0) / elapsed_s:>10.2f}"
                f"   {(cpu - cpu0) * 60_000 / elapsed_s:>10.1f}   {stop_ms:>7.0f}   {status:>4}",
                flush=True,
            )


if __name__ == "__main__":
    kit.run(main)
