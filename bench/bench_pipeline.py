"""Benchmark the notification pipeline on loopback, with real processes.

    .venv/bin/python bench/bench_pipeline.py [--backlog 2000] [--rate 50] [--rate-rows 300]

The stack: an engine database (a temp folder), the notifier daemon (`python -m notifier run`),
the Chief's door (`python -m chief serve`) and the Telegram emulator
(`python -m chief telegram-emulator`). It prints

1. backlog: rows/s for a 2,000-row backlog committed at once, from the commit to the last
   message the emulator received, and CPU milliseconds per delivered row for each process;
2. latency: p50/p99 from each row's commit to the emulator receiving it, rows committed one
   per transaction at `--rate` rows/s (each commit kicks the daemon, as a `coop` verb does).

If the Chief's door cannot start here, the same figures are measured against a minimal test
door (a Starlette app on uvicorn, in its own process) and labelled so: the notifier's part
of the pipeline alone. Figures are printed, never asserted (DESIGN.md: targets p99 < 10 ms at
50 rows/s, a backlog drain of >= 600 rows/s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine import kick as engine_kick  # noqa: E402
from engine import store as engine_store  # noqa: E402
from engine.outbox import enqueue  # noqa: E402

SERVICE_KEY = "bench-service-key-0123456789abcdef"
BOT_TOKEN = "123456:bench-token"
CHAT_ID = "4242"
DOOR_PATH = "/api/coop/engine/notify"
START_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 120.0

# A stand-in door for when `chief serve` is missing: the contract, nothing else; it logs each
# accepted row as one JSON line with its receipt time, as the emulator does.
TEST_DOOR = r"""
import json, sys, time, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
port, key, log_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
out = open(log_path, "a", buffering=1)
async def notify(request):
    if request.headers.get("x-coop-service-key") != key:
        return JSONResponse({"detail": "unauthorized"}, status_code=401)
    body = json.loads(await request.body())
    out.write(json.dumps({"text": body["text"], "received_at": time.time()}) + "\n")
    return JSONResponse({"delivered": True, "outbox_id": body.get("outbox_id")})
app = Starlette(routes=[Route("/api/coop/engine/notify", notify, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(0.005)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def receipts(path: Path) -> dict[str, float]:
    """text -> receipt time, from a JSON-lines log (the emulator's `--log`, or the test door's)."""
    if not path.exists():
        return {}
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            found.setdefault(record["text"], float(record["received_at"]))
    return found


class LineCounter:
    """Lines appended to a file so far, reading only what was appended since the last call: the
    bench polls while the pipeline runs on the same two cores, and rereading a growing file
    every few milliseconds took CPU from the processes being measured."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0

    def __call__(self) -> int:
        if not self.path.exists():
            return 0
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return self.lines


class Stack:
    """The processes of one bench run, in a temp folder."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.db = home / "coop.db"
        self.receipt_log = home / "received.jsonl"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        key = home / "service.key"
        key.write_text(SERVICE_KEY + "\n")
        key.chmod(0o600)
        self.door_port = free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("COOP_", "CHIEF_"))},
            "COOP_HOME": str(home),
            "COOP_DB": str(self.db),
            "COOP_SERVICE_KEY_FILE": str(key),
            "COOP_DOOR_URL": f"http://127.0.0.1:{self.door_port}{DOOR_PATH}",
            "COOP_KICK": "datagram",
            "PYTHONPATH": str(REPO),
        }
        self.label = ""

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.home / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, *args], env=env or self.env, cwd=REPO, stdout=log, stderr=log
        )

    def start_chief(self) -> bool:
        emulator_port = free_port()
        self.spawn(
            "emulator",
            [
                "-m",
                "chief",
                "telegram-emulator",
                "--port",
                str(emulator_port),
                "--log",
                str(self.receipt_log),
            ],
        )
        chief_env = {
            **self.env,
            "CHIEF_OWNER": "owner",
            "CHIEF_PORT": str(self.door_port),
            "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
            "TELEGRAM_CHAT_ID": CHAT_ID,
            "TELEGRAM_API_BASE": f"http://127.0.0.1:{emulator_port}/bot",
        }
        self.spawn("chief", ["-m", "chief", "serve", "--port", str(self.door_port)], chief_env)
        try:
            wait_for(lambda: listening(emulator_port), START_TIMEOUT_S, "the Telegram emulator")
            wait_for(
                lambda: listening(self.door_port) or self.procs["chief"].poll() is not None,
                START_TIMEOUT_S,
                "chief serve",
            )
        except SystemExit:
            return False
        if self.procs["chief"].poll() is not None:
            return False
        self.label = "engine -> notifier -> chief serve -> Telegram emulator"
        return True

    def start_test_door(self) -> None:
        self.spawn(
            "door",
            ["-c", TEST_DOOR, str(self.door_port), SERVICE_KEY, str(self.receipt_log)],
        )
        wait_for(lambda: listening(self.door_port), START_TIMEOUT_S, "the test door")
        self.label = "engine -> notifier -> minimal test door (chief serve unavailable)"

    def start_notifier(self) -> None:
        self.spawn("notifier", ["-m", "notifier", "run"])
        sock = engine_kick.socket_path(self.db)
        wait_for(sock.exists, START_TIMEOUT_S, "the notifier's kick socket")

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    def cpu(self) -> dict[str, float]:
        return {name: cpu_s(p.pid) for name, p in self.procs.items() if p.poll() is None}


def bench_backlog(stack: Stack, rows: int) -> None:
    before = stack.cpu()
    start = time.time()
    with engine_store.connection(stack.db) as conn, engine_store.write(conn):
        for n in range(rows):
            enqueue(conn, "note", f"backlog {n}")
    committed = time.time()
    engine_kick.kick(stack.db, mode="datagram")
    received = LineCounter(stack.receipt_log)
    wait_for(lambda: received() >= rows, DRAIN_TIMEOUT_S, f"{rows} rows at the far end")
    got = receipts(stack.receipt_log)
    last = max(got[f"backlog {n}"] for n in range(rows))
    after = stack.cpu()
    print(f"backlog: {rows} rows committed in {committed - start:.3f}s")
    print(f"  end-to-end drain: {rows / (last - committed):.0f} rows/s ({last - committed:.2f}s)")
    for name in after:
        used_ms = (after[name] - before.get(name, 0.0)) * 1000
        print(f"  CPU {name:>9}: {used_ms / rows:.2f} ms per delivered row")
    print(
        f"  CPU total    : {sum(after[n] - before.get(n, 0.0) for n in after) * 1000 / rows:.2f}"
        " ms per delivered row"
    )


def bench_latency(stack: Stack, rate: float, rows: int) -> None:
    committed: dict[str, float] = {}
    interval_s = 1.0 / rate
    received = LineCounter(stack.receipt_log)
    already = received()
    conn = engine_store.open_connection(stack.db)
    try:
        next_at = time.monotonic()
        for n in range(rows):
            text = f"latency {n}"
            with engine_store.write(conn):
                enqueue(conn, "note", text)
            committed[text] = time.time()
            engine_kick.kick(stack.db, mode="datagram")
            next_at += interval_s
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # pacing the producer, not synchronising
    finally:
        conn.close()
    wait_for(lambda: received() >= already + rows, DRAIN_TIMEOUT_S, "the last latency row")
    got = receipts(stack.receipt_log)
    lat_ms = sorted((got[t] - c) * 1000 for t, c in committed.items() if t in got)
    p50 = statistics.median(lat_ms)
    p99 = lat_ms[min(len(lat_ms) - 1, int(len(lat_ms) * 0.99))]
    print(f"latency at {rate:g} rows/s ({len(lat_ms)} rows, commit -> far end):")
    print(f"  p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {lat_ms[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--rate-rows", type=int, default=300)
    parser.add_argument("--test-door", action="store_true", help="skip chief serve")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coop-bench-") as tmp:
        stack = Stack(Path(tmp))
        try:
            engine_store.open_connection(stack.db).close()
            if args.test_door or not stack.start_chief():
                if not args.test_door:
                    print("bench: chief serve did not start here; see", stack.home / "chief.log")
                    tail = (stack.home / "chief.log").read_text()[-600:]
                    print("  " + tail.replace("\n", "\n  "))
                    stack.stop()
                    stack.procs.clear()
                stack.start_test_door()
            stack.start_notifier()
            print(f"stack: {stack.label}; {os.cpu_count()} CPUs")
            bench_backlog(stack, args.backlog)
            bench_latency(stack, args.rate, args.rate_rows)
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
