"""`coop restore` refused by a process holding the ledger gives advice that fits that process,
each a real one: the drainer a `coop notify` spawned while the door is down (it exits by
itself: wait, or `kill PID`), a process `ops/run`'s honcho started (stop `ops/run`), and any
other (`kill PID`). Before, every refusal said `stop it first (systemctl stop coop-engine
coop-chief-door)`, which fits none of them. A second `coop serve`, `coop-notifier run` or
`chief serve` beside one under `ops/run` is told the same (it said "stop it", not where). (A
systemd unit's case: tests/unit/plumbing/test_holders.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import clean_env, coop, run_module, write_key
from tests.support.waiting import wait_until_sync

WAIT_S = 30.0
#: Holds a lock file the way its owner does (`notifier.pidlock.PidLock`) until it is signalled.
HOLDER = """
import signal, sys
from pathlib import Path
from notifier.pidlock import PidLock
assert PidLock(Path(sys.argv[1]), "the test's lock").try_acquire()
print("holding", flush=True)
while True:
    signal.pause()
"""
#: Holds the door's lock (`chief.serve_lock.ServeLock` on a chief.db) as a door does.
DOOR_HOLDER = """
import signal, sys
from pathlib import Path
from chief.serve_lock import ServeLock
assert ServeLock(Path(sys.argv[1].removesuffix(".serve.lock"))).try_acquire()
print("holding", flush=True)
while True:
    signal.pause()
"""


def run(home: Path, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(home, COOP_ACTOR="builder", **({"COOP_KICK": "off"} | settings))
    return coop(*args, env=env, inherit=False)


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def backed_up(tmp_path: Path) -> tuple[Path, Path]:
    """A data folder with a ledger, and a backup of it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    write_key(home / "service.key", "restore-advice-key-0123456789abcdef")
    assert run(home, "todo", "add", "one").returncode == 0
    assert run(home, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    return home, folder


def pid_in(lock: Path, *, says: bytes) -> int | None:
    """The pid written in `lock`, once it names a live process whose command line holds
    `says`."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(lock.read_text().split()[0])
        if says in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    return None


def test_a_drainer_a_notify_spawned_is_waited_for_or_killed(
    backed_up: tuple[Path, Path],
) -> None:
    home, folder = backed_up
    # The door is down: the drainer `coop notify` spawns waits for it, holding the wait lock.
    nowhere = str(home / "no-door.sock")
    done = run(home, "notify", "hello", COOP_KICK="auto", COOP_DOOR_SOCKET=nowhere)
    assert done.returncode == 0, done.stderr
    lock = home / "coop.db.drain-wait.lock"
    pid = wait_until_sync(
        lambda: pid_in(lock, says=b"notifier\0drain"), timeout_s=WAIT_S, what="the drainer's wait"
    )
    try:
        line = refusal(run(home, "restore", str(folder)))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # the drainer this test's notify spawned
    assert f"a notifier drainer (pid {pid}) holds " in line, line
    assert "one-shot drainer a `coop` command spawned and exits by itself" in line, line
    assert f"wait for it, or `kill {pid}`" in line, line
    assert "systemctl" not in line, line


@contextlib.contextmanager
def held_under_honcho(lock: Path, holder: str, folder: Path) -> Iterator[int]:
    """A process holding `lock` (by the script `holder`), started by honcho (what `ops/run`
    runs), for the block: its pid."""
    home = lock.parent
    script = folder / "holder.py"
    script.write_text(holder)
    procfile = folder / "Procfile"
    procfile.write_text(f"holder: exec {sys.executable} {script} {lock}\n")
    honcho = Path(sys.executable).parent / "honcho"
    proc = subprocess.Popen(
        [str(honcho), "start", "--procfile", str(procfile), "--app-root", str(folder)],
        env=clean_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield wait_until_sync(
            lambda: pid_in(lock, says=str(script).encode()),
            timeout_s=WAIT_S,
            what="the holder under honcho",
        )
    finally:
        proc.send_signal(signal.SIGTERM)  # honcho stops what it started
        proc.wait(timeout=WAIT_S)


def test_a_process_under_ops_run_is_stopped_there(
    backed_up: tuple[Path, Path], tmp_path: Path
) -> None:
    home, folder = backed_up
    with held_under_honcho(home / "coop.db.serve.lock", HOLDER, tmp_path) as pid:
        line = refusal(run(home, "restore", str(folder)))
    assert f"`coop serve` (pid {pid}) holds " in line, line
    assert "it runs under `ops/run`: stop that (Ctrl-C in its terminal)" in line, line
    assert "systemctl" not in line, line


#: A second instance of each service, refused by the lock the first holds: (the lock's name
#: beside the ledger, the holder's script, the command, what the refusal says first).
SECOND_STARTS = [
    ("coop.db.serve.lock", HOLDER, ("notifier", "serve"), "coop serve: another coop serve"),
    ("coop.db.notifier.lock", HOLDER, ("notifier", "run"), "coop-notifier: another notifier"),
    ("chief.db.serve.lock", DOOR_HOLDER, ("chief", "serve"), "chief serve: another `chief serve`"),
]


@pytest.mark.parametrize(
    ("lock", "holder", "command", "said"),
    SECOND_STARTS,
    ids=[c[2][0] + "-" + c[2][1] for c in SECOND_STARTS],
)
def test_a_second_start_beside_one_under_ops_run_is_told_to_stop_it_there(
    backed_up: tuple[Path, Path],
    tmp_path: Path,
    lock: str,
    holder: str,
    command: tuple[str, str],
    said: str,
) -> None:
    home, _ = backed_up
    settings = {"COOP_METRICS_PORT": "off", "CHIEF_METRICS_PORT": "off", "CHIEF_OWNER": "owner"}
    env = clean_env(home, COOP_SERVICE_KEY_FILE=str(home / "service.key"), **settings)
    with held_under_honcho(home / lock, holder, tmp_path) as pid:
        done = run_module(command[0], [command[1]], env=env, inherit=False)
    line = refusal(done)
    assert line.startswith(said), line
    assert f"(pid {pid})" in line, line
    assert "it runs under `ops/run`: stop that (Ctrl-C in its terminal)" in line, line


def test_any_other_holder_is_named_with_its_kill(backed_up: tuple[Path, Path]) -> None:
    home, folder = backed_up
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "coop.db.notifier.lock")],
        env=clean_env(home),
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline() == "holding\n"
            line = refusal(run(home, "restore", str(folder)))
        finally:
            holder.terminate()
            holder.wait(timeout=WAIT_S)
    assert f"(pid {holder.pid}) holds " in line, line
    assert line.endswith(f"stop it (`kill {holder.pid}`); then restore"), line
