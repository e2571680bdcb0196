"""Real `coop` processes: the take race, a crash between the outbox insert and the commit, and
the CLI's exit statuses and one-line refusals."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine import ledger
from tests.support.procs import child_env, coop

RACERS = 6
RACE_ROUNDS = 3


def race_script(db: str, start_file: str, actor: str) -> str:
    return (
        "import os, sys, time\n"
        "from engine import ledger\n"
        "from engine.errors import LifecycleError\n"
        "deadline = time.monotonic() + 30\n"
        f"while not os.path.exists({start_file!r}):\n"
        "    if time.monotonic() > deadline: sys.exit(3)\n"
        "    time.sleep(0.001)\n"
        "try:\n"
        f"    ledger.take_todo(1, actor={actor!r}, db={db!r})\n"
        "except LifecycleError as exc:\n"
        "    print(exc); sys.exit(1)\n"
        "print('won')\n"
    )


@pytest.mark.parametrize("round_", range(RACE_ROUNDS))
def test_racing_takers_exactly_one_wins(db, tmp_path: Path, round_):
    ledger.add_todo("contested", actor="owner", db=db)
    start = str(tmp_path / "go")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", race_script(db, start, f"racer{i}")],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(RACERS)
    ]
    Path(start).touch()
    results = [(p.wait(timeout=60), p.stdout.read().strip(), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    winners = [i for i, (code, out, _) in enumerate(results) if code == 0]
    assert len(winners) == 1, results
    winner = f"racer{winners[0]}"
    for code, out, err in results:
        if code != 0:
            assert code == 1, err
            assert f"already taken by {winner}" in out or "changed under this take" in out
    takes = [e for e in ledger.history("todo", 1, db=db) if e["event"] in ("take", "takeover")]
    assert [(e["event"], e["actor"]) for e in takes] == [("take", winner)]


def test_a_crash_after_the_outbox_insert_leaves_nothing(db):
    env = {"COOP_DB": db, "COOP_ACTOR": "builder"}
    assert coop("todo", "add", "Fix the gate", env=env).returncode == 0
    assert coop("todo", "take", "1", env=env).returncode == 0
    crashed = coop(
        "todo",
        "done",
        "1",
        "--summary",
        "done?",
        env={**env, "COOP_TEST_FAULTS": "engine.outbox.after_insert"},
    )
    assert crashed.returncode == 86
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM todos WHERE id = 1").fetchone() == ("taken",)
        assert conn.execute("SELECT COUNT(*) FROM coop_outbox").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM coop_events WHERE event = 'done'").fetchone() == (
            0,
        )
    again = coop("todo", "done", "1", "--summary", "done", env=env)
    assert again.returncode == 0, again.stderr
    assert "notification #1 queued" in again.stdout


@pytest.mark.parametrize(
    ("args", "env_actor", "words"),
    [
        (["todo", "add", "x"], "", "no actor: pass --as NAME or set COOP_ACTOR"),
        (["todo", "take", "42"], "builder", "todo #42 does not exist"),
        (["todo", "add", "  "], "builder", "the title is empty"),
        (["todo", "release", "1"], "builder", "release needs a reason: pass --reason TEXT"),
        (["todo", "abandon", "1"], "builder", "abandon needs a reason: pass --reason TEXT"),
        (["todo", "take", "one"], "builder", "invalid id value: 'one'"),
        (["outbox", "cancel", "1"], "builder", "cancel needs a reason"),
    ],
)
def test_cli_usage_errors_print_one_line_exit_2_and_change_nothing(db, args, env_actor, words):
    env = {"COOP_DB": db, "COOP_ACTOR": "builder"}
    coop("todo", "add", "seed", env=env)
    coop("todo", "take", "1", env=env)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT COUNT(*) FROM coop_events").fetchone()
    result = coop(*args, env={**env, "COOP_ACTOR": env_actor})
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert words in result.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM coop_events").fetchone() == before


def test_cli_lifecycle_refusal_exits_1_with_the_reason(db):
    env = {"COOP_DB": db, "COOP_ACTOR": "builder"}
    coop("todo", "add", "seed", env=env)
    coop("todo", "take", "1", env=env)
    result = coop("--as", "reviewer", "todo", "take", "1", env=env)
    assert result.returncode == 1
    assert "already taken by builder" in result.stderr
    assert "--force to take it over" in result.stderr


def test_cli_list_history_and_help(db):
    env = {"COOP_DB": db, "COOP_ACTOR": "builder"}
    coop("todo", "add", "Fix the gate", env=env)
    coop("todo", "take", "1", env=env)
    coop("request", "add", "Review", "--to", "reviewer", env=env)
    listing = coop("list", env=env).stdout
    # Two process starts lie between the take and the listing: on a loaded machine that can be
    # more than a second, so the age is read, not assumed.
    # The rows' columns line up: `request #1` is the widest id, the take the widest state.
    assert re.search(r"todo #1     \[taken by builder, \d+ s ago\]  Fix the gate\n", listing)
    assert re.search(r"request #1  \[open\] +  Review        \(for reviewer\)\n", listing)
    todo, request = listing.splitlines()
    assert todo.index("[") == request.index("[")
    assert todo.index("Fix the gate") == request.index("Review"), listing
    history = coop("history", "todo", "1", env=env).stdout
    assert "take" in history
    for args in (["--help"], ["todo", "done", "--help"], ["list", "--help"], ["--version"]):
        result = coop(*args, env=env)
        assert result.returncode == 0
        assert result.stdout.strip()
