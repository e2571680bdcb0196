"""Benchmark the owner's taps: tap -> ledger closed and tap -> toast, with real processes.

    .venv/bin/python bench/bench_phone_taps.py [--taps 100]

The stack (tests/support/phone_stack.py): the Telegram emulator playing the owner, the door
(`python -m chief serve`, its phone long-polling the emulator) and the ledger service
(`python -m engine serve`). `--taps` requests to the owner with two choices each are filed with
`coop request add ... --choices approve,decline` (real processes); each rings as an ask with
its buttons (the door paces a private chat at a message every 1.1 s, so filing and ringing take
most of the run). The owner then presses `approve` on each ask in turn, the next press once the
previous request is closed (an unloaded tap, one at a time). For each tap:

- tap -> closed: from the press (the bench's wall clock just before the emulator's press
  endpoint is called) to the request's `close` event time in coop.db (its `at`, millisecond
  precision), read after the fact, outside the timed path;
- tap -> toast: from the same press to the emulator's record of the answerCallbackQuery
  (`at`, its wall clock when the toast arrived).

It prints p50, p99 and max of each, in milliseconds, and checks every request was closed once,
by the owner, with the choice pressed. Figures are printed, never asserted (the issue's aim:
well under a second for both).
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import tempfile
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path

import benchkit as kit
from benchkit import Stack, wait_for

from tests.support.phone import EmulatorOwner
from tests.support.phone_stack import make_stack, start
from tests.support.procs import coop
from tests.support.stack import CHAT_ID
from tests.support.waiting import wait_until_sync

OWNER_ID = int(CHAT_ID)
# Each ask rings about 1.1 s after the one before it (the door's pacing of a private chat).
RING_WAIT_S = 30.0
CLOSE_WAIT_S = 10.0


def file_requests(stack: Stack, taps: int) -> list[int]:
    ids = []
    for n in range(taps):
        done = coop("request", "add", f"bench tap {n}?", "--to", "owner", "--choices",
                    "approve,decline", env=stack.env(), inherit=False)  # fmt: skip
        if done.returncode != 0:
            raise kit.WaitTimeout(f"coop request add failed: {done.stderr.strip()}")
        found = re.search(r"#(\d+)", done.stdout)
        assert found, done.stdout
        ids.append(int(found.group(1)))
    return ids


def ask_message_id(owner: EmulatorOwner, request_id: int) -> int:
    prefix = f"request #{request_id} "

    def rung() -> int | None:
        for message in owner.messages():
            if str(message["text"]).startswith(prefix) and message.get("reply_markup"):
                return int(message["message_id"])
        return None

    return int(wait_until_sync(rung, timeout_s=RING_WAIT_S, what=f"request #{request_id}'s ask"))


def closed_at(coop_db: Path, request_id: int) -> float | None:
    """The epoch time of the request's close event, or None while it is open."""
    with closing(sqlite3.connect(coop_db)) as conn:
        row = conn.execute(
            "SELECT at FROM coop_events WHERE item_kind = 'request' AND item_id = ? "
            "AND event = 'close'",
            (request_id,),
        ).fetchone()
    if row is None:
        return None
    return datetime.fromisoformat(str(row[0]).replace("Z", "+00:00")).timestamp()


def tap_all(stack: Stack, owner: EmulatorOwner, ids: list[int]) -> list[tuple[int, float, str]]:
    """Press approve on each ask once the previous request is closed and its toast shown:
    (request id, press time, callback query id) per tap."""
    pressed = []
    for request_id in ids:
        message_id = ask_message_id(owner, request_id)
        at = time.time()
        answer = owner.press(OWNER_ID, OWNER_ID, message_id, text="approve")
        pressed.append((request_id, at, str(answer["callback_query_id"])))
        wait_for(lambda rid=request_id: closed_at(stack.coop_db, rid), CLOSE_WAIT_S, "a close")
        query = str(answer["callback_query_id"])
        wait_for(
            lambda q=query: any(a["callback_query_id"] == q for a in owner.callback_answers()),
            CLOSE_WAIT_S,
            "a toast",
        )
    return pressed


def measure(stack: Stack, owner: EmulatorOwner, pressed: list[tuple[int, float, str]]) -> None:
    toasts = {str(a["callback_query_id"]): float(a["at"]) for a in owner.callback_answers()}
    to_closed, to_toast = [], []
    for request_id, at, query_id in pressed:
        closed = closed_at(stack.coop_db, request_id)
        if closed is None or query_id not in toasts:
            raise kit.WaitTimeout(f"request #{request_id}: no close or no toast recorded")
        to_closed.append((closed - at) * 1000)
        to_toast.append((toasts[query_id] - at) * 1000)
    with closing(sqlite3.connect(stack.coop_db)) as conn:
        wrong = conn.execute(
            "SELECT COUNT(*) FROM requests WHERE title LIKE 'bench tap %' AND NOT (status = "
            "'closed' AND closed_by = 'owner' AND result_summary = 'approve')"
        ).fetchone()[0]
        closes = conn.execute(
            "SELECT COUNT(*) FROM coop_events WHERE item_kind = 'request' AND event = 'close'"
        ).fetchone()[0]
    print(f"taps: {len(pressed)}; closes: {closes}; requests not closed by the owner with the "
          f"choice: {wrong}")  # fmt: skip
    for label, values in (("tap -> ledger closed", to_closed), ("tap -> toast", to_toast)):
        print(
            f"{label}: p50 {kit.percentile(values, 50):.1f} ms, "
            f"p99 {kit.percentile(values, 99):.1f} ms, max {max(values):.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--taps", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-taps-") as tmp:
        stack = make_stack(Path(tmp))
        try:
            start(stack)
            print("stack: Telegram emulator (the owner) -> chief serve -> coop serve")
            began = time.monotonic()
            ids = file_requests(stack, args.taps)
            with EmulatorOwner(stack.emulator.url) as owner:
                pressed = tap_all(stack, owner, ids)
                measure(stack, owner, pressed)
            print(f"run: {time.monotonic() - began:.0f} s (filing and the paced asks included)")
            stack.stop()
        finally:
            stack.close()


if __name__ == "__main__":
    kit.run(main)
