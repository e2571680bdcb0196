"""Benchmark: what a stray local client costs the stack's HTTP services, this code against
another tree's (`--baseline DIR`, e.g. a worktree of main), one after the other.

1. A keyless 64 MB POST to `coop serve`'s `/api/coop/phone/answer`, sized by `Content-Length`:
   its answer, the engine's VmRSS and VmHWM (/proc/PID/status) before and after.
2. `--idle` connections that never send a request, held on the door and on `coop serve` at
   once; then one row committed and kicked: the time until its line is in the Chief, waited for
   at most `--wait-s` while the sockets are held; if it has not landed by then, the sockets
   are closed and the time from their close to the landing is given instead.

    .venv/bin/python bench/bench_http_bounds.py [--idle 250] [--wait-s 20] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

import benchkit as kit
from benchkit import Stack

from engine import direct, kick
from engine import store as engine_store
from engine.outbox import enqueue
from tests.support.procs import memory_kb
from tests.support.raw_http import IdleSockets, send_body

BODY_BYTES = 64 * 1024 * 1024
LANDED_POLL_S = 0.005


def _landed(chief_db: Path, text: str) -> bool:
    with sqlite3.connect(f"file:{chief_db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT 1 FROM messages WHERE content LIKE ?", (f"%{text}%",))
        return rows.fetchone() is not None


def _time_to_land(stack: Stack, text: str, wait_s: float) -> float | None:
    """Seconds from the commit to the line in the Chief; None past `wait_s`."""
    began = time.monotonic()
    with direct.connection(stack.coop_db) as conn, engine_store.write(conn):
        enqueue(conn, "note", text)
    kick.send_datagram(stack.coop_db)
    while time.monotonic() - began < wait_s:
        if _landed(stack.chief_db, text):
            return time.monotonic() - began
        time.sleep(LANDED_POLL_S)
    return None


def _body(stack: Stack) -> str:
    assert stack.engine.socket_path
    before = memory_kb(stack.engine.pid)
    status = send_body(stack.engine.socket_path, "POST", "/api/coop/phone/answer", size=BODY_BYTES,
                       chunked=False)  # fmt: skip
    after = memory_kb(stack.engine.pid)
    return (
        f"64 MB keyless body: {status}; engine VmRSS {before['VmRSS'] / 1024:.1f} ->"
        f" {after['VmRSS'] / 1024:.1f} MB, VmHWM {before['VmHWM'] / 1024:.1f} ->"
        f" {after['VmHWM'] / 1024:.1f} MB"
    )


def _flood(stack: Stack, idle: int, wait_s: float) -> str:
    assert stack.door.socket_path
    assert stack.engine.socket_path
    with IdleSockets(stack.door.socket_path, idle), IdleSockets(stack.engine.socket_path, idle):
        held = _time_to_land(stack, "during the flood", wait_s)
        if held is not None:
            return f"{idle} idle on each: the notify landed in {held * 1000:.0f} ms while held"
        closed_at = time.monotonic()
    late = None
    while late is None and time.monotonic() - closed_at < wait_s:
        late = _landed(stack.chief_db, "during the flood") or None
        time.sleep(LANDED_POLL_S)
    after = f"{(time.monotonic() - closed_at) * 1000:.0f} ms after" if late else "not even after"
    return f"{idle} idle on each: not landed within {wait_s:g} s while held; {after} they closed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=250)
    parser.add_argument("--wait-s", type=float, default=20.0)
    parser.add_argument("--baseline", type=Path, help="another tree's code, run after this")
    args = parser.parse_args()
    trees = {"this": kit.REPO}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    for label, tree in trees.items():
        with tempfile.TemporaryDirectory(prefix="bench-bounds-") as raw:
            stack = Stack(Path(raw))
            for part in (stack.emulator, stack.door, stack.engine):
                part.cwd = tree
            try:
                stack.start()
                print(f"{label} ({tree}): {_body(stack)}", flush=True)
                print(f"{label} ({tree}): {_flood(stack, args.idle, args.wait_s)}", flush=True)
            finally:
                stack.stop()
                stack.close()


if __name__ == "__main__":
    kit.run(main)
