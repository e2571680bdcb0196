"""What the stack benches share, on top of the tests' process harness (`tests.support.stack`'s
`Stack`: the emulator, `chief serve`, the minimal test door, `engine serve`, `notifier run`, each
a real process with its log under the run's folder, and CPU and memory read from /proc):

- `start_door`: the Chief's door and the emulator, or the minimal test door (asked for, or when
  `chief serve` cannot start here);
- `start_huey_consumer`: a huey consumer process (bench/huey_job.py) with given polling, ready
  once it logged its start;
- `commit_rows`, `fill_backlog`, `paced`: engine outbox rows, as `coop` verbs write them;
- `receipts`, `LineCounter`, `wait_receipts`, `chief_receipts`, `drain_rate`, `percentile`,
  `cpu_ms_per_row`: the measuring side;
- `run(main)`: a bench's entry point; a wait that runs out or a process that does not start
  ends the run with one line (`bench: ...`), exit status 1.

Every wait is bounded (`wait_for`).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine import kick as engine_kick  # noqa: E402
from engine import store as engine_store  # noqa: E402
from engine.outbox import enqueue  # noqa: E402
from tests.support.procs import Service, memory_kb  # noqa: E402
from tests.support.stack import SERVICE_KEY, Stack  # noqa: E402
from tests.support.waiting import WaitTimeout, wait_until_sync  # noqa: E402

__all__ = [
    "BENCH",
    "SERVICE_KEY",
    "LineCounter",
    "Stack",
    "chief_lines",
    "chief_receipts",
    "commit_rows",
    "cpu_ms_per_row",
    "drain_rate",
    "fill_backlog",
    "latencies_ms",
    "memory_kb",
    "paced",
    "percentile",
    "receipts",
    "run",
    "start_door",
    "start_huey_consumer",
    "wait_chief_receipts",
    "wait_for",
    "wait_receipts",
]

DRAIN_TIMEOUT_S = 120.0
POLL_S = 0.005
# huey's own defaults (huey.consumer.Consumer): poll after 0.1 s, x1.15 per empty poll, cap 10 s.
HUEY_DEFAULT_POLLING = (0.1, 10.0, 1.15)
# "Polling tuned down to 10 ms": a fixed 10 ms poll, no backoff.
HUEY_FAST_POLLING = (0.01, 0.01, 1.0)
DIGEST_HEAD = re.compile(r"^(\d+) updates\n\n")


def run(main: Callable[[], None]) -> None:
    """Run a bench's `main`: a wait that ran out, or a process that did not start, is one line
    on stderr and exit status 1, never a traceback."""
    try:
        main()
    except WaitTimeout as exc:
        raise SystemExit(f"bench: {str(exc).splitlines()[0]}") from None


def wait_for(
    condition: Callable[[], object], timeout_s: float, what: str, poll_s: float = POLL_S
) -> None:
    """Wait until `condition()` holds, for `timeout_s` at the most (a coarser `poll_s` for
    waits of minutes, whose condition reads a growing file)."""
    wait_until_sync(condition, timeout_s=timeout_s, what=what, poll_s=poll_s)


def start_door(stack: Stack, *, test_door: bool = False) -> None:
    """The Chief's door and the emulator; the minimal test door if asked or chief won't start."""
    if not test_door:
        try:
            stack.start_door()
            return
        except WaitTimeout as exc:
            print(f"bench: chief serve did not start here ({str(exc).splitlines()[0]})")
            stack.close()
    stack.start_test_door()
    if test_door:
        stack.label = "minimal test door (asked for: --test-door)"


def start_huey_consumer(
    stack: Stack, name: str, huey_db: Path, polling: tuple[float, float, float]
) -> Service:
    """A huey consumer process (1 worker thread, huey's Consumer API) posting to the door."""
    delay_s, max_delay_s, backoff = polling
    env = stack.env()
    env["PYTHONPATH"] = f"{REPO}:{BENCH}"  # `-m huey_job`: the module the producer imports
    consumer = Service(
        name,
        ["huey_job", "consume", "--db", str(huey_db), "--delay", str(delay_s),
         "--max-delay", str(max_delay_s), "--backoff", str(backoff)],
        stack.folder,
        "",
        env,
        takes_port=False,
        ready_text="consumer started",
    )  # fmt: skip
    return stack.add(consumer)


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


def commit_rows(db: Path, texts: list[str], *, kick: bool) -> dict[str, float]:
    """One outbox row per transaction (as a `coop` verb writes it); text -> commit time."""
    committed: dict[str, float] = {}
    conn = engine_store.open_connection(db)
    try:
        for text in texts:
            with engine_store.write(conn):
                enqueue(conn, "note", text)
            committed[text] = time.time()
            if kick:
                engine_kick.kick(db, mode="datagram")
    finally:
        conn.close()
    return committed


def paced(rate: float, count: int, produce: Callable[[int], str]) -> dict[str, float]:
    """Call `produce(n)` `count` times at `rate` per second; its text -> the time it returned."""
    committed: dict[str, float] = {}
    interval_s = 1.0 / rate
    next_at = time.monotonic()
    for n in range(count):
        text = produce(n)
        committed[text] = time.time()
        next_at += interval_s
        pause_s = next_at - time.monotonic()
        if pause_s > 0:
            time.sleep(pause_s)  # pacing the producer, not synchronising
    return committed


def latencies_ms(committed: dict[str, float], got: dict[str, float]) -> list[float]:
    """Commit -> receipt, in ms, for every committed text that arrived."""
    return [(got[text] - at) * 1000 for text, at in committed.items() if text in got]


def fill_backlog(db: Path, prefix: str, rows: int, batch: int = 5000) -> float:
    """`rows` pending outbox rows, `batch` per transaction (seconds taken); no kick."""
    began = time.perf_counter()
    conn = engine_store.open_connection(db)
    try:
        for start in range(0, rows, batch):
            with engine_store.write(conn):
                for n in range(start, min(rows, start + batch)):
                    enqueue(conn, "note", f"{prefix} {n}")
    finally:
        conn.close()
    return time.perf_counter() - began


def wait_receipts(log: Path, total: int, timeout_s: float, what: str) -> dict[str, float]:
    """Wait until the receipt log holds `total` lines, then read it (text -> receipt time)."""
    counter = LineCounter(log)
    wait_for(lambda: counter() >= total, timeout_s, what)
    return receipts(log)


def drain_rate(times: list[float]) -> float:
    """Rows per second between the first and the last receipt (start-up costs excluded)."""
    times = sorted(times)
    if len(times) < 2 or times[-1] <= times[0]:
        return float("nan")
    return (len(times) - 1) / (times[-1] - times[0])


def percentile(samples: list[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of 500 samples is the 495th smallest)."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def cpu_ms_per_row(before: dict[str, float], after: dict[str, float], rows: int) -> str:
    """`name x.xx` CPU ms per row for each process that ran through the window, and the total."""
    parts = [
        f"{name} {(after[name] - before[name]) * 1000 / rows:.2f}"
        for name in after
        if name in before
    ]
    total = sum(after[n] - before[n] for n in after if n in before) * 1000 / rows
    return ", ".join(parts) + f"; total {total:.2f}"


def chief_receipts(chief_db: Path) -> dict[str, float]:
    """text -> the time its line landed in the Master Chief (chief.db's coop lines)."""
    if not chief_db.exists():
        return {}
    with closing(sqlite3.connect(chief_db, timeout=10.0)) as conn:
        rows = conn.execute("SELECT content, created_at FROM messages WHERE turn_kind = 'coop'")
        return {text: datetime.fromisoformat(at).timestamp() for text, at in rows}


def chief_lines(chief_db: Path) -> int:
    """Coop lines the Master Chief holds."""
    if not chief_db.exists():
        return 0
    with closing(sqlite3.connect(chief_db, timeout=10.0)) as conn:
        sql = "SELECT COUNT(*) FROM messages WHERE turn_kind = 'coop'"
        return int(conn.execute(sql).fetchone()[0])


def wait_chief_receipts(
    chief_db: Path, total: int, timeout_s: float, what: str
) -> dict[str, float]:
    """Wait until the Chief holds `total` coop lines, then read them (text -> landed time)."""
    wait_for(lambda: chief_lines(chief_db) >= total, timeout_s, what, poll_s=0.01)
    return chief_receipts(chief_db)
