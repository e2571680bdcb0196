"""What bench_vs_huey, bench_backlog and bench_memory share, on top of bench/stack.py's `Stack`
(the process-starting code every stack bench uses). It adds the pieces the three benches need:

- `start_engine_service`: `python -m engine serve` (owner endpoint + notifier daemon) on a free
  loopback port, ready once its kick socket is bound;
- `start_huey_consumer` / `stop_proc`: a huey consumer process (bench/huey_job.py) with given
  polling settings, ready once it logged its start;
- `commit_rows`: engine outbox rows, one `enqueue` per transaction, as `coop` verbs write them;
- `wait_receipts`, `drain_rate`, `percentile`, `memory_kb`: the measuring side.

Every wait is bounded (`stack.wait_for` raises SystemExit naming what it waited for).
"""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import stack  # noqa: E402  (sibling module; it puts the repo on sys.path)
from stack import LineCounter, Stack, receipts, wait_for  # noqa: E402

from engine import kick as engine_kick  # noqa: E402
from engine import store as engine_store  # noqa: E402
from engine.outbox import enqueue  # noqa: E402

__all__ = [
    "BENCH",
    "LineCounter",
    "Stack",
    "commit_rows",
    "cpu_ms_per_row",
    "drain_rate",
    "fill_backlog",
    "latencies_ms",
    "memory_kb",
    "paced",
    "percentile",
    "receipts",
    "stack",
    "start_door",
    "start_engine_service",
    "start_huey_consumer",
    "stop_proc",
    "wait_for",
    "wait_receipts",
    "wait_slowly",
]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
HUEY_JOB = BENCH / "huey_job.py"
# huey's own defaults (huey.consumer.Consumer): poll after 0.1 s, x1.15 per empty poll, cap 10 s.
HUEY_DEFAULT_POLLING = (0.1, 10.0, 1.15)
# "Polling tuned down to 10 ms": a fixed 10 ms poll, no backoff.
HUEY_FAST_POLLING = (0.01, 0.01, 1.0)


def start_door(stack: Stack, *, test_door: bool = False) -> None:
    """The Chief's door and the emulator; the minimal test door if asked or chief won't start."""
    if not test_door and stack.start_chief():
        return
    if not test_door:
        print(f"bench: chief serve did not start here; see {stack.home / 'chief.log'}")
        stack.stop()
        stack.procs.clear()
    stack.start_test_door()
    if test_door:
        stack.label = "minimal test door (asked for: --test-door)"


def start_engine_service(stack: Stack) -> subprocess.Popen[bytes]:
    """`python -m engine serve` on a free port; ready when the daemon's kick socket exists."""
    sock = engine_kick.socket_path(stack.db)
    sock.unlink(missing_ok=True)
    env = {**stack.env, "COOP_SERVICE_PORT": "0"}
    stack.spawn("engine", ["-m", "engine", "serve"], env)
    proc = stack.procs["engine"]
    wait_for(
        lambda: sock.exists() or proc.poll() is not None, START_TIMEOUT_S, "engine serve's socket"
    )
    if proc.poll() is not None:
        raise SystemExit(f"bench: engine serve exited; see {stack.home / 'engine.log'}")
    return proc


def start_huey_consumer(
    stack: Stack, name: str, huey_db: Path, polling: tuple[float, float, float]
) -> subprocess.Popen[bytes]:
    """A huey consumer process (1 worker thread, huey's Consumer API) posting to the door."""
    delay_s, max_delay_s, backoff = polling
    log_path = stack.home / f"{name}.log"
    stack.spawn(
        name,
        [
            str(HUEY_JOB),
            "consume",
            "--db",
            str(huey_db),
            "--delay",
            str(delay_s),
            "--max-delay",
            str(max_delay_s),
            "--backoff",
            str(backoff),
        ],
    )
    proc = stack.procs[name]

    def started() -> bool:
        return proc.poll() is not None or (
            log_path.exists() and "consumer started" in log_path.read_text()
        )

    wait_for(started, START_TIMEOUT_S, f"the huey consumer {name}")
    if proc.poll() is not None:
        raise SystemExit(f"bench: the huey consumer exited; see {log_path}")
    return proc


def stop_proc(stack: Stack, name: str, sig: int = signal.SIGTERM) -> None:
    """Stop one process of the stack (SIGTERM: the engine finishes its row; huey stops at once)."""
    proc = stack.procs.pop(name)
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


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


def wait_slowly(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float) -> None:
    """`wait_for` with a coarser poll, for waits of minutes (bounded all the same)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(poll_s)


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


def memory_kb(pid: int) -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS of `pid`, in kB, from /proc/PID/status."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0])
    return found


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
    import sqlite3
    from contextlib import closing
    from datetime import datetime

    if not chief_db.exists():
        return {}
    with closing(sqlite3.connect(chief_db, timeout=10.0)) as conn:
        rows = conn.execute("SELECT content, created_at FROM messages WHERE turn_kind = 'coop'")
        return {text: datetime.fromisoformat(at).timestamp() for text, at in rows}


def chief_lines(chief_db: Path) -> int:
    import sqlite3
    from contextlib import closing

    if not chief_db.exists():
        return 0
    with closing(sqlite3.connect(chief_db, timeout=10.0)) as conn:
        sql = "SELECT COUNT(*) FROM messages WHERE turn_kind = 'coop'"
        return int(conn.execute(sql).fetchone()[0])


def wait_chief_receipts(
    chief_db: Path, total: int, timeout_s: float, what: str
) -> dict[str, float]:
    """Wait until the Chief holds `total` coop lines, then read them (text -> landed time)."""
    wait_slowly(lambda: chief_lines(chief_db) >= total, timeout_s, what, poll_s=0.01)
    return chief_receipts(chief_db)
