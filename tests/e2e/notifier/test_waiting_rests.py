"""A stack that waits for a part that is down rests: every process of it, measured from /proc
over a window while the door, `coop serve` or Telegram is down, uses under 1% of a core and
writes no database file (coop.db, chief.db, their -wal) while nothing changes.

The figures are fractions of the window (CPU seconds from /proc/PID/stat over the window's wall
time, never a timed assert), and the files' sizes and mtimes before and after it. A hot loop
(the one-shot drainer that re-drained at once while the door's socket refused it, writing a try
each turn) shows as tens of percent and megabytes of WAL; a resting waiter as a tick or two.
Then the part comes back and the waiting row is delivered: resting did not strand it.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.procs import clean_env, coop, cpu_s, write_key
from tests.support.stack import SERVICE_KEY, Stack
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.slow  # tens of seconds when loaded: handed out early (tests/conftest.py)

# The window over which a waiting stack is measured: what is measured, not a wait for an event.
# Long enough for several retry intervals of the door's outage (1 s by default) and to decide:
# CPU comes from /proc in clock ticks (10 ms), so 1% of 3 s is 3 ticks, a resting waiter's tick
# or two passes and the hot loop this guards against (over half a core: 150 ticks) fails.
WINDOW_S = 3.0
MAX_CORE_FRACTION = 0.01
# How long the database files stay unchanged before the window opens (`_quiet`).
QUIET_S = 0.5
SETTLE_TIMEOUT_S = 60.0
BACK_WITHIN_S = 30.0
# The door's sender has tried Telegram this often: its next try is 8 s away or more, well past
# the window's 3 s (tries wait 1, 2, 4, 8 s and on, each plus up to a fifth): a loaded machine
# that starts the window late still sees no try in it.
TELEGRAM_TRIES_BEFORE = 4


@dataclass(frozen=True)
class Sample:
    cpu_s: dict[str, float]
    files: dict[str, tuple[int, int]]  # name: (size, mtime_ns)
    wall_s: float


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for name in ("coop.db", "coop.db-wal", "chief.db", "chief.db-wal"):
        try:
            st = (folder / name).stat()
        except FileNotFoundError:
            continue
        found[name] = (st.st_size, st.st_mtime_ns)
    return found


def _sample(folder: Path, pids: dict[str, int]) -> Sample:
    return Sample(
        {name: cpu_s(pid) for name, pid in pids.items()}, _files(folder), time.monotonic()
    )


def _measure(folder: Path, pids: dict[str, int]) -> tuple[dict[str, float], list[str]]:
    """Each process's CPU over the window as a fraction of one core, and the database files
    written during it."""
    before = _sample(folder, pids)
    time.sleep(WINDOW_S)  # the window measured (see WINDOW_S)
    after = _sample(folder, pids)
    wall_s = after.wall_s - before.wall_s
    fractions = {name: (after.cpu_s[name] - before.cpu_s[name]) / wall_s for name in pids}
    written = sorted(name for name, seen in after.files.items() if before.files.get(name) != seen)
    print(f"over {wall_s:.2f} s: core fractions {fractions}, files written {written}")
    return fractions, written


def _quiet(folder: Path) -> bool:
    """The database files unchanged over QUIET_S: the last step of what the test started (a
    try's deferral, then the worker lock's release, which a loaded machine can leave apart) has
    landed. A waiter writing at its retry interval (1 s) still leaves such a gap, and the window
    after it then holds its next writes."""
    first = _files(folder)
    time.sleep(QUIET_S)  # the quiet period compared, not a wait for an event
    return _files(folder) == first


def _assert_rests(folder: Path, pids: dict[str, int]) -> None:
    wait_until_sync(
        lambda: _quiet(folder), timeout_s=SETTLE_TIMEOUT_S, what="the database files to settle"
    )
    fractions, written = _measure(folder, pids)
    busy = {name: round(f, 4) for name, f in fractions.items() if f >= MAX_CORE_FRACTION}
    assert busy == {}, f"busy while waiting (fraction of a core): {busy}"
    assert written == [], f"database files written while nothing changed: {written}"


def _outbox(db: Path) -> list[tuple[int, str, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(conn.execute("SELECT id, state, attempts FROM coop_outbox ORDER BY id"))
    finally:
        conn.close()


def _tried(db: Path) -> bool:
    return any(attempts > 0 for _, _, attempts in _outbox(db))


def _delivered(db: Path) -> bool:
    rows = _outbox(db)
    return bool(rows) and all(state == "delivered" for _, state, _ in rows)


def _telegram_tries(chief_db: Path) -> int:
    conn = sqlite3.connect(f"file:{chief_db}?mode=ro", uri=True)
    try:
        return int(
            conn.execute("SELECT coalesce(max(attempts), 0) FROM telegram_queue").fetchone()[0]
        )
    except sqlite3.OperationalError:  # not made yet
        return 0
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _end(pids: Iterable[int]) -> None:
    """SIGTERM the detached processes this test started (by pid), then wait them out."""
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    for pid in pids:
        wait_until_sync(lambda pid=pid: not _alive(pid), timeout_s=30, what=f"pid {pid} gone")


def _wait_lock_pid(db: Path) -> int | None:
    """The pid of the one-shot drainer waiting on this ledger (its wait lock holds it)."""
    try:
        text = Path(str(db) + ".drain-wait.lock").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() and _alive(int(text)) else None


def test_a_spawned_drainer_rests_while_the_door_is_not_running_then_delivers(
    tmp_path: Path,
) -> None:
    # Local mode as a person runs it: no daemon, `coop notify` spawns the one-shot drainer, the
    # project's own retry settings (a 1 s look while nothing listens).
    folder = tmp_path
    db = folder / "coop.db"
    env = clean_env(
        folder,
        COOP_DB=str(db),
        COOP_SERVICE_KEY_FILE=str(write_key(folder / "service.key", SERVICE_KEY)),
        COOP_ACTOR="prover",
    )
    drainers: list[int] = []
    stack = Stack(folder)
    try:
        done = coop("notify", "written while the door is down", env=env, inherit=False)
        assert done.returncode == 0, done.stderr
        pid = wait_until_sync(
            lambda: _wait_lock_pid(db) if _tried(db) else None,
            timeout_s=SETTLE_TIMEOUT_S,
            what="the spawned drainer tried the row and waits",
        )
        drainers.append(pid)
        _assert_rests(folder, {"drainer": pid})

        stack.start_test_door()  # the door comes back on the socket the drainer looks at
        wait_until_sync(lambda: _delivered(db), timeout_s=BACK_WITHIN_S, what="the row delivered")
        [(_, _, attempts)] = _outbox(db)
        assert attempts == 2, "tried once when it went out, once when the door came back"
    finally:
        _end(drainers)
        stack.stop()
        stack.close()


def test_coop_serve_rests_while_the_door_is_not_running_then_delivers(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    try:
        stack.start_engine()  # no door: nothing listens at <folder>/door.sock
        done = coop("notify", "written while the door is down", env=stack.env(), inherit=False)
        assert done.returncode == 0, done.stderr
        wait_until_sync(lambda: _tried(stack.coop_db), timeout_s=SETTLE_TIMEOUT_S, what="a try")
        _assert_rests(tmp_path, {"engine": stack.engine.pid})

        stack.start_test_door()
        wait_until_sync(
            lambda: _delivered(stack.coop_db), timeout_s=BACK_WITHIN_S, what="the row delivered"
        )
    finally:
        stack.stop()
        stack.close()


@pytest.mark.parametrize("down", ["telegram", "coop serve"])
def test_the_whole_stack_rests_while_one_part_is_down(tmp_path: Path, down: str) -> None:
    # The emulator, the door and `coop serve`; one of them down, a line delivered as far as it
    # can go; then every process left is measured.
    stack = Stack(tmp_path)
    try:
        stack.start()
        if down == "telegram":
            stack.emulator.kill()
        else:
            stack.engine.kill()
        text = f"written while {down} is down"
        done = coop("notify", text, env=stack.env(), inherit=False)
        assert done.returncode == 0, done.stderr
        if down == "telegram":
            # The door took the line; its sender tries Telegram on a growing backoff (1, 2, 4,
            # 8 s and on, each try a write that records it). Measured just after the try whose
            # next one is at least 8 s away: the window holds no try, so nothing changes.
            wait_until_sync(
                lambda: _delivered(stack.coop_db), timeout_s=SETTLE_TIMEOUT_S, what="to the door"
            )
            wait_until_sync(
                lambda: _telegram_tries(stack.chief_db) >= TELEGRAM_TRIES_BEFORE,
                timeout_s=SETTLE_TIMEOUT_S,
                what=f"{TELEGRAM_TRIES_BEFORE} failed sends to Telegram",
                poll_s=0.05,
            )
        # With `coop serve` down its daemon is down too: the line waits in coop.db (the stack
        # kicks by datagram, no drainer is spawned) and the door and the emulator idle.
        running = {part.name: part.pid for part in stack.running()}
        _assert_rests(tmp_path, running)
    finally:
        stack.stop()
        stack.close()
