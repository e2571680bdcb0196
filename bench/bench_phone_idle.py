"""Benchmark: what the door's phone (the long poll for the owner's updates) costs an idle door.

Two `chief serve` processes side by side in one run, against one Telegram emulator, each on a
chief.db of its own, nothing to deliver: the door with the phone on (a private chat, so its user
is obeyed and the door long-polls getUpdates) and the door as it was before (a group chat nobody
is paired with: the same door, no phone). Over the same fixed window, after both started and
settled, each door's CPU (user + system, /proc/PID/stat, every thread) and wakeups (voluntary
context switches, summed over /proc/PID/task/*/status: the door runs a thread per chief.db
connection besides its event loop), and the emulator's getUpdates calls in the window.

    .venv/bin/python bench/bench_phone_idle.py [--window-s 60] [--rounds 1]
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

SETTLE_S = 3.0  # after start: the imports, getMe, setMyCommands and the first poll are done


def wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of `pid` so far."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # a thread that ended between the listing and the read
            continue
        for line in lines:
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


def polls_so_far(stack: Stack) -> int:
    """getUpdates calls the emulator has answered (or is holding open) so far."""
    return int(stack.telegram_calls()["calls"].get("getupdates", 0))


def sample(door: Service) -> tuple[float, int]:
    return door.cpu_s(), wakeups(door.pid)


def start(stack: Stack, folder: Path) -> Service:
    """The emulator and the door with the phone (`stack`'s), then the door without it."""
    stack.start_door()
    stack.door.wait_event("door.phone_commands_registered", "the phone to start")
    off_folder = folder / "off"
    off_folder.mkdir()
    write_key(off_folder / "service.key", SERVICE_KEY)
    env = stack_env(
        off_folder,
        TELEGRAM_CHAT_ID="-1001",
        TELEGRAM_API_BASE=f"{stack.emulator.url}/bot",
        CHIEF_METRICS_PORT="off",
    )
    off = stack.add(  # on its own socket, <off>/door.sock
        Service("door-off", ["chief", "serve"], off_folder, "door.listening", env, takes_port=False)
    )
    off.wait_event("door.phone_off", "the door without the phone")
    return off


def measure(stack: Stack, off: Service, window_s: float) -> dict[str, tuple[float, float]]:
    """(CPU ms per minute, wakeups per minute) of each door over one window."""
    on = stack.door
    calls_before = polls_so_far(stack)
    before = {"on": sample(on), "off": sample(off)}
    began = time.monotonic()
    time.sleep(window_s)  # the window itself: idle doors, nothing to wait for
    elapsed_s = time.monotonic() - began
    after = {"on": sample(on), "off": sample(off)}
    polls = polls_so_far(stack) - calls_before
    per_min = 60.0 / elapsed_s
    figures = {
        name: (
            (after[name][0] - before[name][0]) * 1000 * per_min,
            (after[name][1] - before[name][1]) * per_min,
        )
        for name in ("on", "off")
    }
    print(f"window {elapsed_s:.1f} s, getUpdates calls in it: {polls}", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=SETTLE_S,
        help="the pause before the window opens (a smoke run: 0)",
    )
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-phone-") as raw:
        folder = Path(raw)
        (folder / "on").mkdir()
        stack = Stack(folder / "on")
        try:
            off = start(stack, folder)
            time.sleep(args.settle_s)  # let both finish starting before the window opens
            print("door                  CPU ms/min   wakeups/min")
            for round_no in range(1, args.rounds + 1):
                figures = measure(stack, off, args.window_s)
                for name, label in (("on", "phone on (long poll)"), ("off", "phone off (before)")):
                    cpu, woke = figures[name]
                    line = f"{label:<21} {cpu:>10.1f}   {woke:>11.1f}   (round {round_no})"
                    print(line, flush=True)
        finally:
            stack.stop()
            stack.close()


if __name__ == "__main__":
    kit.run(main)
