"""Private by construction: every entry point that makes the data folder makes it owner-only
whatever the umask it was started with. Each test starts one entry point as a real process
under umask 000 on a folder that does not exist yet, then walks the tree it made: no folder,
file, socket or lock in it may carry a group or other bit (the folder 0700, the files 0600,
SQLite's -wal and -shm included).

The service key lives outside the walked folder (`COOP_SERVICE_KEY_FILE`): the test writes it,
the processes only read it. The processes' logs go to `<tmp>/logs`, outside it too.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from chief.telegram.emulator import create_emulator
from engine import kick
from tests.support.asgi import serve_asgi_in_thread
from tests.support.phone import EmulatorOwner
from tests.support.procs import Service, clean_env, coop, run_module, write_key
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(120)

KEY = "private-folder-key-0123456789"
BOT_TOKEN = "123456:private-token"
OWNER_ID = 4242
WAIT_S = 20.0


@contextmanager
def umask_000() -> Iterator[None]:
    """Children started inside inherit umask 000 (the loosest a shell can give them)."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def loose(top: Path) -> list[str]:
    """Every entry under `top` (itself included) with a group or other bit, as `mode path`."""
    paths = [str(top)]
    for root, folders, files in os.walk(top):
        paths += [os.path.join(root, name) for name in [*folders, *files]]
    found = []
    for path in paths:
        info = os.lstat(path)
        if info.st_mode & 0o077 and not stat.S_ISLNK(info.st_mode):
            found.append(f"{stat.S_IMODE(info.st_mode):04o} {path}")
    return found


def assert_private(top: Path) -> None:
    found = loose(top)
    assert not found, "group or other bits on:\n" + "\n".join(found)


def _env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """A child's environment whose data folder, `<tmp>/fresh/coop`, does not exist yet."""
    key = tmp_path / "service.key"
    if not key.exists():
        write_key(key, KEY)
    base = {
        "COOP_SERVICE_KEY_FILE": str(key),
        "COOP_ACTOR": "agent",
        # No door at <COOP_HOME>/door.sock but a test's own: a notifier's rows are deferred,
        # which is not under test. A door serves no /metrics port (parallel tests share none).
        "CHIEF_METRICS_PORT": "off",
        "COOP_BACKOFF_BASE_S": "60",
        "CHIEF_OWNER": "owner",
    }
    return clean_env(tmp_path / "fresh" / "coop", **(base | settings))


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_coop_verbs_and_a_waiter_make_a_private_folder(tmp_path: Path) -> None:
    # COOP_KICK=auto with no daemon: `notify` spawns a drainer, whose log lands beside coop.db
    # (the drainer itself stops at once: its key file is missing).
    env = _env(tmp_path, COOP_KICK="auto", COOP_SERVICE_KEY_FILE=str(tmp_path / "absent.key"))
    with umask_000():
        _ok(coop("todo", "add", "a todo", env=env, inherit=False))
        _ok(coop("notify", "a line", env=env, inherit=False))
        _ok(coop("request", "add", "a question?", env=env, inherit=False))
        waiter = subprocess.Popen(
            [sys.executable, "-m", "engine", "request", "wait", "1", "--timeout", "60"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        # Beside coop.db, or in /tmp under a hashed name when that path is too long for a socket.
        waiters = Path(kick.waiters_folder(tmp_path / "fresh" / "coop" / "coop.db"))
        wait_until_sync(
            lambda: waiters.is_dir() and any(waiters.iterdir()), timeout_s=WAIT_S, what="a waiter"
        )
        assert (tmp_path / "fresh" / "coop" / "coop.db.drainer.log").exists()
        while_waiting = loose(tmp_path / "fresh") + loose(waiters)
        with umask_000():
            _ok(coop("request", "take", "1", env=env, inherit=False))
            _ok(coop("request", "close", "1", "--summary", "done", env=env, inherit=False))
        assert waiter.wait(WAIT_S) == 0, waiter.stderr.read() if waiter.stderr else ""
        with umask_000():
            _ok(coop("backup", str(tmp_path / "fresh" / "backups"), env=env, inherit=False))
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.communicate()
    assert not while_waiting, "\n".join(while_waiting)
    assert_private(tmp_path / "fresh")


def _serve(tmp_path: Path, env: dict[str, str]) -> Service:
    return Service(
        "serve",
        ["engine", "serve"],
        tmp_path,
        "service.listening",
        {**env, "COOP_METRICS_PORT": "0"},
        takes_port=False,
    )


def test_coop_serve_and_its_cutover_make_a_private_folder(tmp_path: Path) -> None:
    env = _env(tmp_path, COOP_KICK="off")
    serve = _serve(tmp_path, env)
    try:
        with umask_000():
            serve.start()
            serve.wait_event("notifier.daemon.started")
        assert_private(tmp_path / "fresh")
        with umask_000():
            _ok(coop("cutover", env=env, inherit=False))
            # Routed to the owner service now: it writes a receipt for the call.
            _ok(coop("todo", "add", "through the owner", env=env, inherit=False))
        assert any((tmp_path / "fresh" / "coop" / "receipts").iterdir())
        assert_private(tmp_path / "fresh")
    finally:
        if serve.running:
            serve.terminate()
    assert_private(tmp_path / "fresh")


def test_the_standalone_notifier_makes_a_private_folder(tmp_path: Path) -> None:
    env = _env(tmp_path, COOP_KICK="datagram")
    daemon = Service(
        "notifier", ["notifier", "run"], tmp_path, "notifier.daemon.started", env, takes_port=False
    )
    try:
        with umask_000():
            daemon.start()
        assert_private(tmp_path / "fresh")
    finally:
        if daemon.running:
            daemon.terminate()
    assert_private(tmp_path / "fresh")


def test_chief_serve_makes_a_private_folder(tmp_path: Path) -> None:
    env = _env(tmp_path)
    door = Service("door", ["chief", "serve"], tmp_path, "door.listening", env, takes_port=False)
    try:
        with umask_000():
            door.start()
        assert_private(tmp_path / "fresh")
    finally:
        if door.running:
            door.terminate()
    assert_private(tmp_path / "fresh")


def test_chief_report_makes_a_private_folder(tmp_path: Path) -> None:
    with umask_000():
        done = run_module(
            "chief", ["report", "--source", "cron:nightly", "backup done"], _env(tmp_path),
            inherit=False,
        )  # fmt: skip
    _ok(done)
    assert (tmp_path / "fresh" / "coop" / "chief.db").exists()
    assert_private(tmp_path / "fresh")


def test_chief_telegram_pair_makes_a_private_folder(tmp_path: Path) -> None:
    app, _ = create_emulator(token=BOT_TOKEN)
    with serve_asgi_in_thread(app) as url, EmulatorOwner(url) as owner:
        env = _env(
            tmp_path, TELEGRAM_BOT_TOKEN=BOT_TOKEN, TELEGRAM_API_BASE=url + "/bot",
            TELEGRAM_TIMEOUT_S="5",
        )  # fmt: skip
        with umask_000():
            pair = subprocess.Popen(
                [sys.executable, "-m", "chief", "telegram", "pair", "--timeout", "60"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        try:
            assert pair.stdout is not None
            code = _code(pair.stdout)
            owner.text(OWNER_ID, OWNER_ID, f"/start {code}", username="owner")
            _, err = pair.communicate(timeout=WAIT_S)
        finally:
            if pair.poll() is None:
                pair.kill()
                pair.communicate()
    assert pair.returncode == 0, err
    assert (tmp_path / "fresh" / "coop" / "telegram-pairing.json").exists()
    assert_private(tmp_path / "fresh")


def _code(stdout: object) -> str:
    """The one-time code `chief telegram pair` prints, read line by line as it comes."""
    for line in stdout:  # type: ignore[attr-defined]
        found = re.search(r"/start (\S+)", line)
        if found:
            return found[1]
    raise AssertionError("chief telegram pair printed no code")
