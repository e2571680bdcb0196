"""The processes of a bench run, shared by every bench script that starts the stack: a temp folder
with a 0600 service key, `chief serve`, the Telegram emulator, the minimal test door
(`tests.support.loopback_door` in its own process, for measuring the notifier alone), receipt
logs, CPU readings from /proc. Every wait is bounded (`wait_for` raises SystemExit naming what
it waited for).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine import kick as engine_kick  # noqa: E402
from tests.support import procs  # noqa: E402  (the tests' and benches' one process harness)

SERVICE_KEY = "bench-service-key-0123456789abcdef"
BOT_TOKEN = "123456:bench-token"
CHAT_ID = "4242"
DOOR_PATH = "/api/coop/engine/notify"
START_TIMEOUT_S = 20.0
DRAIN_TIMEOUT_S = 120.0


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


DIGEST_HEAD = re.compile(r"^(\d+) updates\n\n")


def carried(text: str) -> list[str]:
    """The row texts one received message carries: itself, or each entry of a door digest
    ("N updates", then the rows' texts separated by blank lines)."""
    head = DIGEST_HEAD.match(text)
    if head is None:
        return [text]
    parts = text[head.end() :].split("\n\n")
    return parts if len(parts) == int(head[1]) else [text]


def receipts(path: Path) -> dict[str, float]:
    """text -> receipt time, from a JSON-lines log (the emulator's `--log`, or the test door's);
    a digest's rows are received when the digest is."""
    if not path.exists():
        return {}
    found: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            for text in carried(record["text"]):
                found.setdefault(text, float(record["received_at"]))
    return found


class LineCounter:
    """Rows received in a growing JSON-lines log, read incrementally (a 100,000-line log re-read
    every few milliseconds would cost the machine more than the processes being measured). A
    line is one row, or a door digest's count of rows."""

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
        complete = chunk.rfind(b"\n") + 1  # a line still being written is counted next time
        if b"updates" in chunk[:complete]:  # digests: count the rows each one carries
            for line in chunk[:complete].splitlines():
                text = json.loads(line)["text"] if line.strip() else ""
                head = DIGEST_HEAD.match(text)
                self.lines += int(head[1]) if head else int(bool(line.strip()))
        else:
            self.lines += chunk.count(b"\n", 0, complete)
        self.offset += complete
        return self.lines


class Stack:
    """The processes of one bench run, in a temp folder."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.db = home / "coop.db"
        self.receipt_log = home / "received.jsonl"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        key = procs.write_key(home / "service.key", SERVICE_KEY)
        self.door_port = free_port()
        self.env = procs.clean_env(
            home,
            COOP_DB=str(self.db),
            COOP_SERVICE_KEY_FILE=str(key),
            COOP_DOOR_URL=f"http://127.0.0.1:{self.door_port}{DOOR_PATH}",
            COOP_KICK="datagram",
        )
        self.label = ""

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = (self.home / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, *args], env=env or self.env, cwd=REPO, stdout=log, stderr=log
        )

    def start_chief(self, emulator_args: tuple[str, ...] = ()) -> bool:
        emulator_port = free_port()
        self.emulator_port = emulator_port
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
                *emulator_args,
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
            [
                "-m",
                "tests.support.loopback_door",
                str(self.door_port),
                SERVICE_KEY,
                str(self.receipt_log),
            ],
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
