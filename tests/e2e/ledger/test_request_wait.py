"""`coop request wait` as a real process, woken by a `coop request close` in another process.

The waiter binds its socket in `<coop.db>.waiters/` before it reads the request; these tests
wait for that socket (a bounded wait on the folder), then act. A test that would hang if the
wake were lost gives its waiter a `--timeout` far above what the wake takes, so a lost wake
shows as exit 3, never as a slow pass. The seams between the bind and the first look, and
between a look and the blocking wait, are held open with `plumbing.faults`' pause points.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import kick
from tests.support.procs import PROCESS_TIMEOUT_S, child_env, coop
from tests.support.waiting import wait_until_sync

#: How long a waiter process may take to start and bind, on a loaded machine.
START_S = 30.0
#: Far above what a wake takes: a waiter that needs it was not woken.
LOST_WAKE_TIMEOUT_S = "30"
#: A generous bound on close → waiter returned (the figure is the bench's: bench_wait.py).
WAKE_BOUND_S = 5.0

#: The console script's body (`.venv/bin/coop`), with Ctrl-C's default restored: a test runner
#: may start its children with SIGINT ignored, and Python then leaves it ignored.
CONSOLE_SCRIPT = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from engine.cli import main\n"
    "sys.exit(main())\n"
)


class Waiter:
    """One `coop request wait ...` process, its output captured."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CONSOLE_SCRIPT, "request", "wait", *args],
            env=child_env(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=PROCESS_TIMEOUT_S)
        return self.proc.returncode, out, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=PROCESS_TIMEOUT_S)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"COOP_DB": str(tmp_path / "coop.db"), "COOP_ACTOR": "agent", "COOP_KICK": "off"}


@pytest.fixture
def waiters() -> Iterator[list[Waiter]]:
    started: list[Waiter] = []
    yield started
    for each in started:
        each.stop()


def ok(env: dict[str, str], *args: str) -> str:
    done = coop(*args, env=env)
    assert done.returncode == 0, f"coop {' '.join(args)}: {done.stderr}"
    return done.stdout


def sockets(env: dict[str, str]) -> list[str]:
    """The waiters' sockets beside the store (none: the folder is gone too)."""
    folder = kick.waiters_folder(env["COOP_DB"])
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        return []


def bound(env: dict[str, str], count: int = 1) -> list[str]:
    """Wait until `count` waiters have bound their sockets."""

    def enough() -> list[str]:
        found = sockets(env)
        return found if len(found) >= count else []

    return wait_until_sync(enough, timeout_s=START_S, what=f"{count} waiter socket(s)")


def start(waiters: list[Waiter], env: dict[str, str], *args: str) -> Waiter:
    waiter = Waiter(env, *args)
    waiters.append(waiter)
    return waiter


def test_a_waiter_returns_when_another_process_closes_the_request(
    env: dict[str, str], waiters: list[Waiter]
) -> None:
    ok(env, "request", "add", "order the bigger bag?", "--to", "owner")
    waiter = start(waiters, env, "1", "--timeout", LOST_WAKE_TIMEOUT_S)
    bound(env)
    began = time.monotonic()
    ok(env, "request", "close", "1", "--summary", "approve", "--as", "owner")
    code, out, err = waiter.finish()
    took_s = time.monotonic() - began
    assert (code, out, err) == (0, "request #1 closed by owner: approve\n", "")
    assert took_s < WAKE_BOUND_S
    assert sockets(env) == []
    assert not os.path.exists(kick.waiters_folder(env["COOP_DB"]))


def test_a_closed_request_answers_at_once_and_json_gives_the_row(env: dict[str, str]) -> None:
    ok(env, "request", "add", "r")
    ok(env, "request", "close", "1", "--summary", "done", "--commit", "abc123")
    done = coop("request", "wait", "1", env=env)
    assert (done.returncode, done.stdout) == (
        0,
        "request #1 closed by agent: done (commit abc123)\n",
    )
    as_json = coop("request", "wait", "1", "--json", env=env)
    assert as_json.returncode == 0
    assert '"status": "closed"' in as_json.stdout
    assert sockets(env) == []


def test_a_timeout_exits_3_in_one_line_and_leaves_no_socket(env: dict[str, str]) -> None:
    ok(env, "request", "add", "r")
    done = coop("request", "wait", "1", "--timeout", "0.2", env=env)
    assert (done.returncode, done.stdout) == (3, "")
    assert done.stderr == "coop: request #1 still open after 0.2 s\n"
    assert sockets(env) == []
    assert not os.path.exists(kick.waiters_folder(env["COOP_DB"]))
    looked_once = coop("request", "wait", "1", "--timeout", "0", env=env)
    assert (looked_once.returncode, looked_once.stderr) == (
        3,
        "coop: request #1 still open after 0 s\n",
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["7"], "coop: request #7 does not exist — `coop list --all` shows the ids\n"),
        (["1", "--timeout", "nan"], "coop: argument --timeout must be a finite number\n"),
        (["1", "--timeout", "inf"], "coop: argument --timeout must be a finite number\n"),
        (["1", "--timeout", "-1"], "coop: timeout -1 is not a duration: give 0 or more seconds\n"),
    ],
    ids=["unknown id", "nan", "inf", "negative"],
)
def test_an_unknown_id_or_a_bad_timeout_is_one_line_exit_2(
    env: dict[str, str], args: list[str], said: str
) -> None:
    ok(env, "request", "add", "r")
    done = coop("request", "wait", *args, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
    assert sockets(env) == []


def test_a_wait_on_a_ledger_not_yet_made_answers_as_show_does(env: dict[str, str]) -> None:
    # A short folder, so that the waiters' folder is beside the store (pytest's are too deep).
    folder = tempfile.mkdtemp(prefix="w", dir="/tmp")
    try:
        db = os.path.join(folder, "not", "yet", "coop.db")
        assert os.path.dirname(kick.waiters_folder(db)) == os.path.dirname(db)
        for verb in ("wait", "show"):
            done = coop("request", verb, "1", "--db", db, env=env)
            assert done.returncode == 1, done.stderr
            assert done.stderr.startswith(f"coop: no ledger at {db} (--db): a read creates none")
        # Nothing made: no ledger, no waiters' folder, not even the folders above them.
        assert os.listdir(folder) == []
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize(
    ("stop", "status", "said"),
    [(signal.SIGINT, 130, "coop: interrupted\n"), (signal.SIGTERM, 143, "")],
    ids=["Ctrl-C", "SIGTERM"],
)
def test_a_stopped_wait_exits_in_one_line_and_removes_its_socket(
    env: dict[str, str], waiters: list[Waiter], stop: signal.Signals, status: int, said: str
) -> None:
    ok(env, "request", "add", "r")
    waiter = start(waiters, env, "1")
    bound(env)
    waiter.proc.send_signal(stop)
    code, out, err = waiter.finish()
    assert (code, out, err) == (status, "", said)
    assert sockets(env) == []
    assert not os.path.exists(kick.waiters_folder(env["COOP_DB"]))


def test_every_waiter_of_a_request_wakes(env: dict[str, str], waiters: list[Waiter]) -> None:
    ok(env, "request", "add", "r")
    many = [start(waiters, env, "1", "--timeout", LOST_WAKE_TIMEOUT_S) for _ in range(5)]
    bound(env, 5)
    ok(env, "request", "close", "1", "--summary", "yes")
    assert [each.finish() for each in many] == [(0, "request #1 closed by agent: yes\n", "")] * 5
    assert sockets(env) == []


def test_a_close_of_another_request_does_not_end_the_wait(
    env: dict[str, str], waiters: list[Waiter]
) -> None:
    ok(env, "request", "add", "a")
    ok(env, "request", "add", "b")
    waiter = start(waiters, env, "1", "--timeout", LOST_WAKE_TIMEOUT_S)
    (name,) = bound(env)
    assert name.startswith("1.")
    # A close of #2 sends #1's waiter nothing at all: it finds no socket named for #2.
    ok(env, "request", "close", "2", "--summary", "b done")
    assert kick.wake_waiters(env["COOP_DB"], 2) == 0
    assert waiter.proc.poll() is None
    assert sockets(env) == [name]
    ok(env, "request", "close", "1", "--summary", "a done")
    assert waiter.finish() == (0, "request #1 closed by agent: a done\n", "")


@pytest.mark.parametrize("seam", ["engine.wait.bound", "engine.wait.looked"])
def test_a_close_in_the_gap_before_the_wait_blocks_still_wakes_it(
    env: dict[str, str], waiters: list[Waiter], tmp_path: Path, seam: str
) -> None:
    """`bound`: the close commits after the bind, before the first look (the look sees it).
    `looked`: after a look found the request open, before the wait blocks (the datagram is
    already queued on the socket). Without the bind first, the second would be lost."""
    ok(env, "request", "add", "r")
    hold = tmp_path / "hold"
    hold.touch()
    waiter = start(
        waiters,
        {**env, "COOP_TEST_FAULTS": f"{seam}:pause-while={hold}"},
        "1",
        "--timeout",
        LOST_WAKE_TIMEOUT_S,
    )
    wait_until_sync(
        lambda: Path(f"{hold}.reached").exists(), timeout_s=START_S, what=f"the waiter at {seam}"
    )
    ok(env, "request", "close", "1", "--summary", "in the gap")
    hold.unlink()
    assert waiter.finish() == (0, "request #1 closed by agent: in the gap\n", "")


def test_a_killed_waiters_socket_is_removed_by_the_next_wake(
    env: dict[str, str], waiters: list[Waiter]
) -> None:
    ok(env, "request", "add", "r")
    waiter = start(waiters, env, "1")
    (name,) = bound(env)
    waiter.proc.kill()
    waiter.finish()
    assert sockets(env) == [name]  # SIGKILL runs no cleanup
    ok(env, "request", "close", "1")
    assert sockets(env) == []
    assert not os.path.exists(kick.waiters_folder(env["COOP_DB"]))


def test_the_python_api_waits_for_a_close_in_another_process(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import ledger
    from engine.errors import TimedOut

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ok(env, "request", "add", "r")
    with pytest.raises(TimedOut, match=r"request #1 still open after 0\.1 s") as timed_out:
        ledger.wait_request(1, timeout_s=0.1)
    assert timed_out.value.exit_status == 3
    assert sockets(env) == []
    closer = subprocess.Popen(
        [sys.executable, "-c", CLOSE_WHEN_BOUND, env["COOP_DB"]], env=child_env(env)
    )
    try:
        answer = ledger.wait_request(1, timeout_s=float(LOST_WAKE_TIMEOUT_S))
    finally:
        assert closer.wait(timeout=PROCESS_TIMEOUT_S) == 0
    assert answer["request"]["status"] == "closed"
    assert answer["request"]["result_summary"] == "from the API"
    assert sockets(env) == []


#: A closer for the API test: it waits (bounded) for the waiter's socket, then closes.
CLOSE_WHEN_BOUND = """
import os, sys, time
from engine import kick, ledger
folder = kick.waiters_folder(sys.argv[1])
deadline = time.monotonic() + 30
while not (os.path.isdir(folder) and os.listdir(folder)):
    assert time.monotonic() < deadline, "no waiter bound"
    time.sleep(0.01)
ledger.close_request(1, actor="owner", result_summary="from the API")
"""
