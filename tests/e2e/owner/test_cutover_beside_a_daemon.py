"""A cutover never strands delivery: `coop cutover` and `coop cutover --undo` beside the daemons
that deliver, all real processes (the Chief's door `chief serve` without Telegram, `coop serve`,
`coop-notifier run`, the `coop` CLI) over one data folder per test, the door shared by the
module.

- `coop cutover` refuses in one line while a standalone daemon holds the ledger, naming its pid
  and how to stop it, and changes nothing; once that daemon is stopped it goes through, and a
  row filed afterwards reaches the Chief once.
- A standalone daemon that took the ledger anyway (it looked for the owner file before the
  cutover wrote it, and took the lock after) finds the fence at its first drain, says so in one
  line and exits 0; `coop serve` takes delivery over and the row reaches the Chief once.
- While such a daemon holds the ledger (held here before its first drain), `coop status
  --check` names the row stuck behind it, its pid and what to do, and exits 1.
- `coop cutover --undo` with `coop serve`'s daemon delivering leaves the folder in local mode
  and the daemon delivering a row filed locally afterwards.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.support.procs import Service, coop
from tests.support.stack import Stack
from tests.support.waiting import wait_until_sync

REPORT_KEY_PREFIX = "chief-report:coop-notify:"
# `coop serve` tries the daemon's lock about once a second (notifier.engine_service): a few
# seconds, with room for a loaded machine, bound the takeover and the delivery behind it.
DELIVERY_TIMEOUT_S = 15.0
SQLITE_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The Chief's door (`chief serve`, Chief-only: Telegram is not under test), shared by the
    module: each test brings its own coop.db."""
    stack = Stack(
        tmp_path_factory.mktemp("door"),
        door_env={"TELEGRAM_BOT_TOKEN": "", "TELEGRAM_CHAT_ID": ""},
    )
    try:
        stack.door.start()
        stack.started.append(stack.door)
        yield stack
    finally:
        stack.close()


class Folder:
    """One test's ledger beside the shared door: its environment, its processes, its reads."""

    def __init__(self, home: Path, door: Stack) -> None:
        self.home = home
        self.db = home / "coop.db"
        self.chief_db = door.chief_db
        self.env = door.env(
            COOP_HOME=str(home),
            COOP_DB=str(self.db),
            COOP_DOOR_SOCKET=str(door.door_socket),
            COOP_METRICS_PORT="off",
        )
        self.daemon = Service(
            "daemon", ["notifier", "run"], home, "notifier.daemon.started", self.env,
            takes_port=False,
        )  # fmt: skip
        self.serve = Service(
            "serve", ["engine", "serve"], home, "service.listening", self.env,
            takes_port=False,
        )  # fmt: skip

    def coop(self, *args: str) -> tuple[int, str, str]:
        done = coop(*args, env=self.env, inherit=False)
        return done.returncode, done.stdout, done.stderr

    def ok(self, *args: str) -> str:
        status, out, err = self.coop(*args)
        assert status == 0, f"coop {' '.join(args)}: {err}"
        return out

    def query(self, db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
        with closing(sqlite3.connect(db, timeout=SQLITE_TIMEOUT_S)) as conn:
            return conn.execute(sql, params).fetchall()

    def chief_lines(self) -> Counter[int]:
        """The Chief's lines per outbox row of this ledger (by the row's delivery key)."""
        ids = dict(self.query(self.db, "SELECT delivery_key, id FROM coop_outbox"))
        rows = self.query(
            self.chief_db,
            "SELECT external_request_id FROM messages WHERE external_request_id LIKE ?",
            REPORT_KEY_PREFIX + "%",
        )
        keys = [str(row[0]).removeprefix(REPORT_KEY_PREFIX) for row in rows]
        return Counter(int(str(ids[key])) for key in keys if key in ids)

    def wait_chief_lines(self, expected: dict[int, int], what: str) -> None:
        wait_until_sync(
            lambda: self.chief_lines() == Counter(expected),
            timeout_s=DELIVERY_TIMEOUT_S,
            what=what,
        )

    def fence(self) -> list[object]:
        sql = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'coop_fence_%'"
        return [row[0] for row in self.query(self.db, sql)]

    def leftovers(self) -> list[str]:
        """What a cutover writes beside the database: none of it in local mode."""
        names = [".owner.json", ".owner.key"]
        found = [name for name in names if Path(str(self.db) + name).exists()]
        return found + sorted(path.name for path in self.home.glob("coop.db.pre-cutover-*"))

    def close(self) -> None:
        for part in (self.serve, self.daemon):
            if part.running:
                part.kill()


@pytest.fixture
def folder(tmp_path: Path, door: Stack) -> Iterator[Folder]:
    made = Folder(tmp_path, door)
    try:
        yield made
    finally:
        made.close()


def plain_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("{")]


def held(path: Path) -> Path:
    """A pause file for a fault point (`plumbing.faults`: pause-while=PATH)."""
    path.touch()
    return path


def test_cutover_refuses_beside_a_standalone_daemon_then_goes_through_once_it_stops(
    folder: Folder,
) -> None:
    folder.daemon.start()
    folder.serve.start()
    folder.serve.wait_event("service.delivery_left_to_daemon")

    status, out, err = folder.coop("cutover")

    assert status != 0, out
    assert "Traceback" not in err
    [line] = plain_lines(err)
    assert f"pid {folder.daemon.pid}" in line, line
    assert f"kill {folder.daemon.pid}" in line, line
    assert folder.leftovers() == []
    assert folder.fence() == []

    assert folder.daemon.terminate() == 0
    folder.serve.wait_event("service.delivery_taken_over", timeout_s=DELIVERY_TIMEOUT_S)
    folder.ok("cutover")
    folder.ok("todo", "add", "milk")
    folder.ok("todo", "done", "1")
    folder.wait_chief_lines({1: 1}, "the finished todo's row to reach the Chief once")
    assert "Traceback" not in folder.serve.log()


def _daemon_holding_the_ledger_after_a_cutover(folder: Folder) -> Path:
    """A standalone daemon that looked for the owner file before the cutover wrote it and took
    the ledger's lock after: held asleep before its first drain. Returns its pause file."""
    before_lock = held(folder.home / "before-lock")
    before_drain = held(folder.home / "before-drain")
    faults = f"notifier.daemon.before_lock:pause-while={before_lock},"
    faults += f"notifier.daemon.before_drain:pause-while={before_drain}"
    folder.daemon.start(faults=faults, wait=False)
    wait_until_sync(Path(f"{before_lock}.reached").exists, what="the daemon before its lock")
    folder.ok("cutover")
    before_lock.unlink()
    folder.daemon.wait_listening()
    wait_until_sync(Path(f"{before_drain}.reached").exists, what="the daemon before its drain")
    folder.serve.start()
    left = folder.serve.wait_event("service.delivery_left_to_daemon")
    assert left["daemon_pid"] == folder.daemon.pid
    folder.ok("todo", "add", "milk")
    folder.ok("todo", "done", "1")
    return before_drain


def test_a_daemon_that_finds_the_fence_is_named_by_check_then_steps_aside(
    folder: Folder,
) -> None:
    before_drain = _daemon_holding_the_ledger_after_a_cutover(folder)
    try:
        status, out, err = folder.coop("status", "--check")

        assert status == 1, out + err
        needs = [line for line in out.splitlines() if line.startswith("needs a person:")]
        assert len(needs) == 1, out
        assert "outbox row #1" in needs[0], needs
        assert f"pid {folder.daemon.pid}" in needs[0], needs
        assert f"kill {folder.daemon.pid}" in needs[0], needs
    finally:
        before_drain.unlink(missing_ok=True)

    folder.wait_chief_lines({1: 1}, "the row filed after the cutover to reach the Chief once")
    assert folder.daemon.wait_exit() == 0
    [aside] = folder.daemon.events("notifier.daemon.stepped_aside")
    assert "coop serve" in aside["note"], aside
    assert folder.daemon.events("notifier.daemon.drain_failed") == []
    assert "Traceback" not in folder.daemon.log()
    assert folder.serve.events("service.delivery_taken_over")
    assert folder.serve.get("/status", timeout=10).json()["daemon"] is True
    assert folder.coop("status", "--check")[0] == 0
    assert folder.serve.terminate() == 0


def test_undo_beside_serves_daemon_leaves_local_mode_and_the_daemon_delivering(
    folder: Folder,
) -> None:
    folder.serve.start()
    folder.serve.wait_event("notifier.daemon.started")
    folder.ok("cutover")

    lines = folder.ok("cutover", "--undo").splitlines()

    assert [line.split(" ", 2)[:2] for line in lines] == [
        ["dropped", "the"], ["removed", "the"], ["removed", "the"]
    ]  # fmt: skip
    assert folder.leftovers() == [
        name for name in folder.leftovers() if name.startswith("coop.db.pre-cutover-")
    ]
    assert folder.fence() == []
    owner_events = "SELECT event FROM coop_events WHERE item_kind = 'owner' ORDER BY id"
    events = folder.query(folder.db, owner_events)
    assert [row[0] for row in events] == ["cutover", "cutover_undo"]
    answer = folder.serve.get("/status", timeout=10).json()
    assert (answer["mode"], answer["daemon"]) == ("local", True)

    folder.ok("notify", "in local mode again")
    folder.wait_chief_lines({1: 1}, "a row filed locally to reach the Chief once")
    assert folder.coop("status", "--check")[0] == 0, json.dumps(folder.serve.events()[-5:])
    assert folder.serve.terminate() == 0
