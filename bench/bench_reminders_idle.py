"""Benchmark: an idle door (`chief serve`) with 100 pending reminders against one with none.

Two stacks side by side in one run, each the Telegram emulator and the door (its phone's long
poll included): one is sent 100 asks with reminders due far ahead (`remind.every_s` an hour),
rung first (the chat's pacing lets about one a second through), so 100 schedules wait in
chief.db; the other is sent nothing. Over one window, each door's wakeups (voluntary context
switches summed over its threads, /proc/PID/task/*/status) and CPU (/proc/PID/stat). Nothing
polls: the nag task sleeps until the earliest due time, cut to a minute (`MAX_SLEEP_S`).

    .venv/bin/python bench/bench_reminders_idle.py [--asks 100] [--window-s 60]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

import benchkit as kit
from bench_phone_idle import wakeups
from benchkit import Stack

from tests.support.procs import socket_client
from tests.support.stack import NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER

SETTLE_S = 3.0  # after the last ask rang: its sent mark, the nag's turn, the phone's poll
EVERY_S = 3600  # reminders due an hour ahead: none falls due in the window


def ask_row(number: int) -> dict[str, object]:
    ask = {
        "request_id": number,
        "key": "q-" + uuid.uuid4().hex,
        "title": f"request {number}",
        "choices": ["approve", "decline"],
        "remind": {"every_s": EVERY_S, "max": 3},
    }
    return {
        "text": f"request #{number} filed",
        "kind": "request.added",
        "outbox_id": "d-" + uuid.uuid4().hex,
        "ask": ask,
    }


def file_asks(stack: Stack, count: int) -> None:
    """`count` asks posted as the notifier posts them, then waited for until each rang and
    its reminders are scheduled (bounded: the pacing rings about one a second)."""
    with socket_client(stack.door_socket, 10.0) as client:  # the door's socket
        for number in range(1, count + 1):
            answer = client.post(
                NOTIFY_PATH,
                json=ask_row(number),
                headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            )
            answer.raise_for_status()
    kit.wait_for(
        lambda: stack.door_status()["reminders"]["scheduled"] == count,
        timeout_s=count * 1.5 + 30,
        what=f"{count} asks rung, their reminders scheduled",
        poll_s=0.5,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=100)
    parser.add_argument("--window-s", type=float, default=60.0)
    parser.add_argument(
        "--settle-s",
        type=float,
        default=SETTLE_S,
        help="the pause before the window opens (a smoke run: 0)",
    )
    args = parser.parse_args()
    stacks: dict[str, Stack] = {}
    with tempfile.TemporaryDirectory(prefix="bench-reminders-") as raw:
        try:
            for label in ("none", f"{args.asks} reminders"):
                (Path(raw) / label).mkdir()
                stacks[label] = Stack(Path(raw) / label)
                stacks[label].start_door()
            file_asks(stacks[f"{args.asks} reminders"], args.asks)
            time.sleep(args.settle_s)  # let the last ring's turn end before the window opens
            doors = {label: stack.door for label, stack in stacks.items()}
            before = {label: (door.cpu_s(), wakeups(door.pid)) for label, door in doors.items()}
            began = time.monotonic()
            time.sleep(args.window_s)  # the window itself: idle doors, nothing to wait for
            elapsed_s = time.monotonic() - began
            after = {label: (door.cpu_s(), wakeups(door.pid)) for label, door in doors.items()}
            status = stacks[f"{args.asks} reminders"].door_status()["reminders"]
        finally:
            for stack in stacks.values():
                stack.close()
    print(f"window {elapsed_s:.1f} s; reminders: {status}")
    print("door with            wakeups/s   CPU ms/min")
    for label in stacks:
        (cpu0, woke0), (cpu, woke) = before[label], after[label]
        print(
            f"{label:<20} {(woke - woke0) / elapsed_s:>10.2f}"
            f"   {(cpu - cpu0) * 60_000 / elapsed_s:>10.1f}",
            flush=True,
        )


if __name__ == "__main__":
    kit.run(main)
