"""The owner service as real processes: the whole CLI through `coop serve` after a cutover, the
fence against a raw writer, SIGKILL and reconcile, SIGTERM, and the undo."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

from engine.store.schema import FENCED_OPERATIONS, FENCED_TABLES
from tests.e2e.owner.conftest import ServeProcess, ok, run_coop
from tests.support.procs import child_env
from tests.support.waiting import wait_until_sync

FENCE_TRIGGERS = len(FENCED_TABLES) * len(FENCED_OPERATIONS)


def _count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)  # a raw reader: the fence refuses writes only
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _raw_write(db: Path) -> subprocess.CompletedProcess[str]:
    """Another process writing the ledger with plain sqlite3, around the owner."""
    script = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1])\n"
        'conn.execute("INSERT INTO todos (title, created_by, created_at, updated_at)'
        " VALUES ('sneaked in', 'mallory', 'x', 'x')\")\n"
        "conn.commit()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=child_env(),
    )


def _cut_over(env: dict[str, str], serve: ServeProcess) -> None:
    out = ok(env, "cutover")
    assert f"installed the fence ({FENCE_TRIGGERS} triggers)" in out


def test_the_whole_cli_works_through_coop_serve_and_a_raw_write_is_refused(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path
) -> None:
    env = stack_env
    db = tmp_path / "coop.db"
    ok(env, "todo", "add", "from before the cutover")
    serve.start()
    _cut_over(env, serve)

    assert ok(env, "todo", "add", "write the report") == "todo #2 added\n"
    assert ok(env, "todo", "take", "2") == "todo #2 taken by agent\n"
    assert ok(env, "todo", "release", "2", "--reason", "lunch") == "todo #2 released\n"
    assert "notification #1 queued" in ok(env, "todo", "done", "2", "--summary", "sent")
    assert "abandoned" in ok(env, "todo", "abandon", "1", "--reason", "obsolete")
    ok(env, "request", "add", "review it", "--to", "reviewer")
    ok(env, "--as", "reviewer", "request", "take", "1")
    refused = run_coop(env, "request", "close", "1")
    assert refused.returncode == 1
    assert "request #1 is taken by reviewer" in refused.stderr
    assert "closed" in ok(env, "--as", "reviewer", "request", "close", "1")
    assert "notification #4 queued" in ok(env, "notify", "tea is ready")
    assert "cancelled" in ok(env, "outbox", "cancel", "4", "--reason", "drunk already")
    assert "due now" in ok(env, "outbox", "retry", "3")
    assert "#4  cancelled" in ok(env, "outbox", "list")
    listed = json.loads(ok(env, "list", "--all", "--json"))
    assert [(i["kind"], i["id"], i["status"]) for i in listed] == [
        ("todo", 1, "abandoned"),
        ("todo", 2, "done"),
        ("request", 1, "closed"),
    ]
    history = ok(env, "history", "todo", "2")
    assert [line.split("ago)")[1].split()[0] for line in history.splitlines()] == [
        "add",
        "take",
        "release",
        "done",
    ]
    status = ok(env, "status")
    assert "todos: 1 abandoned, 1 done" in status
    assert "uncertain receipts: none" in status
    usage = run_coop(env, "todo", "take", "99")
    assert (usage.returncode, usage.stderr.strip()) == (
        2,
        "coop: todo #99 does not exist — `coop list --all` shows the ids",
    )

    raw = _raw_write(db)
    assert raw.returncode != 0
    assert "no such function: coop_owner_service_required" in raw.stderr
    assert _count(db, "todos") == 2
    # Every call after the cutover was filed by the owner under its request key.
    assert _count(db, "coop_commands") == 17
    assert "owner.call" in serve.log()
    # The embedded notifier writes outbox state through the fence on the owner's connections:
    # the door is down, so the head row it was kicked for records a deferred attempt.
    wait_until_sync(lambda: _attempts(db, 1) >= 1, timeout_s=20, what="a deferred attempt")
    assert "coop_owner_service_required" not in serve.log()


def _attempts(db: Path, outbox_id: int) -> int:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT attempts FROM coop_outbox WHERE id = ?", (outbox_id,))
        return int(row.fetchone()[0])
    finally:
        conn.close()


def test_owner_killed_then_the_next_add_fails_closed_and_reconcile_settles_it(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path
) -> None:
    env = stack_env
    db = tmp_path / "coop.db"
    hold = tmp_path / "hold-the-call"
    serve.start(faults=f"engine.owner.before_call:pause-while={hold}")
    _cut_over(env, serve)
    ok(env, "todo", "add", "while the owner lives")
    # Killed with a call in flight: the request crossed, its outcome is unknown.
    hold.touch()
    calls: list[subprocess.CompletedProcess[str]] = []
    caller = threading.Thread(
        target=lambda: calls.append(run_coop(env, "todo", "add", "while the owner is dead"))
    )
    caller.start()
    wait_until_sync(Path(str(hold) + ".reached").exists, what="the call in flight")
    serve.kill()
    caller.join(60)
    (failed,) = calls
    # Once it is down, nothing crosses at all: one line, no receipt.
    down_add = run_coop(env, "todo", "add", "while nothing listens")
    assert down_add.returncode == 1
    assert down_add.stderr == (
        f"coop: Coop owner unavailable: coop serve is not running (nothing listens at"
        f" {tmp_path / 'service.sock'}); nothing was sent\n"
    )

    assert failed.returncode == 1
    match = re.fullmatch(
        r"coop: Coop owner unavailable; no local write attempted; reconcile request"
        r" ([0-9a-f]{32})\n",
        failed.stderr,
    )
    assert match, failed.stderr
    key = match.group(1)
    receipt = json.loads((tmp_path / "receipts" / f"{key}.json").read_text())
    assert (receipt["state"], receipt["method"]) == ("uncertain", "add_todo")
    assert "while the owner is dead" not in json.dumps(receipt)  # hashes, never bodies
    assert _count(db, "todos") == 1
    down = run_coop(env, "status")
    assert down.returncode == 1
    assert f"uncertain receipt {key}  add_todo" in down.stdout

    restarted = ServeProcess(tmp_path, env)
    restarted.starts = serve.starts  # its logs go on after the first service's
    try:
        restarted.start()
        settled = ok(env, "reconcile", key)
        assert f"request {key} never arrived" in settled
        assert "receipt settled rejected" in settled
        assert "uncertain receipts: none" in ok(env, "status")
        assert _count(db, "todos") == 1
        ok(env, "todo", "add", "after the restart")
        assert _count(db, "todos") == 2
    finally:
        restarted.stop_quietly()


def test_sigterm_stops_the_service_cleanly_with_exit_zero(
    serve: ServeProcess, stack_env: dict[str, str]
) -> None:
    serve.start()
    _cut_over(stack_env, serve)
    ok(stack_env, "todo", "add", "one")

    assert serve.terminate() == 0
    assert "service.stopped" in serve.log()


def test_undo_returns_to_local_mode_while_the_service_keeps_running(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path
) -> None:
    env = stack_env
    db = tmp_path / "coop.db"
    serve.start()
    _cut_over(env, serve)
    ok(env, "todo", "add", "in service mode")

    undone = ok(env, "cutover", "--undo")

    assert f"dropped the fence ({FENCE_TRIGGERS} triggers)" in undone
    assert "removed the owner file" in undone
    assert not Path(str(db) + ".owner.json").exists()
    assert ok(env, "todo", "add", "in local mode") == "todo #2 added\n"
    assert _raw_write(db).returncode == 0
    assert _count(db, "todos") == 3
    assert "nothing to undo" in ok(env, "cutover", "--undo")
