"""`coop todo show` and `coop request show` routed to a real `coop serve` after `coop cutover`:
the same fields and events as a local ledger shows, `--json` too, and an unknown id refused in
one line with exit 2 (docs/cli.md's exit table: a usage refusal)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.e2e.owner.conftest import ServeProcess, ok, run_coop


def test_show_through_the_owner_service(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path
) -> None:
    env = stack_env
    serve.start()
    assert "installed the fence" in ok(env, "cutover")
    ok(env, "todo", "add", "Water the plants")
    ok(env, "todo", "take", "1")
    ok(env, "request", "add", "Review it", "--to", "reviewer")

    shown = ok(env, "todo", "show", "1").splitlines()
    assert shown[0].startswith("todo #1  [taken by agent, ")
    events = shown[shown.index("events:") + 1 :]
    assert [line.split("ago)")[1].split()[0] for line in events] == ["add", "take"]

    answer = json.loads(ok(env, "request", "show", "1", "--json", "--last", "1"))
    assert answer["request"]["addressed_to"] == "reviewer"
    assert [event["event"] for event in answer["events"]] == ["add"]

    for kind in ("todo", "request"):
        refused = run_coop(env, kind, "show", "9")
        assert (refused.returncode, refused.stdout) == (2, "")
        assert (
            refused.stderr == f"coop: {kind} #9 does not exist — `coop list --all` shows the ids\n"
        )
    # Each show ran at the owner, filed under its request key.
    with closing(sqlite3.connect(tmp_path / "coop.db")) as conn:
        methods = [row[0] for row in conn.execute("SELECT method FROM coop_commands")]
    assert methods.count("show_todo") == 2
    assert methods.count("show_request") == 2
