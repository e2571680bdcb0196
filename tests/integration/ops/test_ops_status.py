"""`coop status` and `--check` as a real CLI process, against a real ledger file and the real
notify door on uvicorn (on its Unix socket, bound as `chief serve` binds it): healthy, each
reason a person is needed, and usage errors."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from engine import ledger, outbox
from engine.owner import receipts
from tests.integration.ops.conftest import closed_socket, door_on_socket, made_ledger
from tests.support.procs import coop, write_key


def door_environ(home: Path, **extra: str) -> dict[str, str]:
    return {
        "COOP_HOME": str(home),
        "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
        "CHIEF_OWNER": "owner",
        "CHIEF_METRICS_PORT": "off",
        **extra,
    }


@pytest.fixture
def door(home: Path) -> Iterator[str]:
    """The real door (no Telegram configured: status still answers)."""
    env = door_environ(home)
    app = create_app(DoorConfig.from_env(env), ChiefConfig.from_env(env))
    with door_on_socket(app, home / "door.sock") as path:
        yield path


def status(home: Path, door_socket: str, *args: str):
    made_ledger(home)
    return coop("status", *args, env={"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door_socket})


def test_healthy_stack_checks_zero_and_shows_every_part(home, door):
    ledger.add_todo("open one", actor="builder")
    result = status(home, door, "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "todos: 1 open" in out
    assert "outbox: 0 pending, 0 delivered, 0 cancelled" in out
    assert "worker lock: free" in out
    assert "uncertain receipts: none" in out
    assert (
        f"door: answering at {door}; 0 Chief reports undelivered,"
        " 0 sent, posture normal, Telegram not configured"
    ) in out
    assert "telegram queue: empty" in out
    assert "needs a person" not in out
    assert out.splitlines()[-1] == "verdict: healthy"


def test_an_old_pending_row_needs_a_person(home, door):
    outbox.notify("waiting", actor="cron")
    assert status(home, door, "--check").returncode == 0  # young: fine
    result = status(home, door, "--check", "--max-pending-age", "0.001")
    assert result.returncode == 1
    assert "needs a person: outbox row #1 has waited" in result.stdout


def test_failing_rows_show_attempts_error_and_next_attempt(home, door):
    outbox.notify("stuck", actor="cron")
    with sqlite3.connect(home / "coop.db") as conn:
        conn.execute(
            "UPDATE coop_outbox SET attempts = 3, last_error = 'door answered 503',"
            " next_attempt_at = next_attempt_at + 60"
        )
    out = status(home, door).stdout
    assert re.search(r"failing: #1, 3 attempts, the next in (\d+ s|1 min) — door answered 503", out)
    assert "door answered 503" in out


def test_an_uncertain_receipt_needs_a_person(home, door):
    receipts.create("k" * 32, "add_todo", "0" * 64, str(home / "coop.db"))
    result = status(home, door, "--check")
    assert result.returncode == 1
    assert f"uncertain receipt {'k' * 32} (add_todo): coop reconcile" in result.stdout


def test_a_door_that_does_not_answer_needs_a_person(home):
    ledger.add_todo("x", actor="builder")
    url = closed_socket(home / "door.sock")
    result = status(home, url, "--check")
    assert result.returncode == 1
    assert "door: did not answer at" in result.stdout
    assert "needs a person: the door did not answer" in result.stdout
    # Telegram's queue is the door's: unknown, and not a second problem.
    assert "telegram queue: unknown (the door did not answer)" in result.stdout
    assert result.stdout.count("needs a person") == 1
    assert result.stdout.splitlines()[-1] == "verdict: not healthy (1 problem above)"
    # Without --check the view is still shown and the command succeeds.
    assert status(home, url).returncode == 0


def test_a_blocked_posture_needs_a_person(home):
    posture = home / "posture.json"
    posture.write_text(json.dumps({"state": "blocked"}))
    env = door_environ(home, CHIEF_POSTURE_FILE=str(posture))
    app = create_app(DoorConfig.from_env(env), ChiefConfig.from_env(env))
    with door_on_socket(app, home / "door.sock") as path:
        result = status(home, path, "--check")
    assert result.returncode == 1
    assert "posture_blocked" in result.stdout


def test_json_view_carries_every_figure_and_the_problems(home, door):
    outbox.notify("one", actor="cron")
    result = status(home, door, "--json")
    report = json.loads(result.stdout)
    assert report["outbox"] == {"pending": 1, "delivered": 0, "cancelled": 0}
    assert report["oldest_pending"]["id"] == 1
    assert report["door"]["answered"] is True
    assert report["door"]["telegram_configured"] is False
    assert report["problems"] == []
    assert set(report) >= {"ledger", "stale_takes", "failing", "worker_lock", "uncertain_receipts"}


@pytest.mark.parametrize("bad", ["abc", "-1", "0"])
def test_a_bad_max_pending_age_is_a_usage_error(home, bad):
    result = status(home, closed_socket(home / "door.sock"), "--check", "--max-pending-age", bad)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_bad_max_pending_age_setting_is_a_usage_error(home):
    result = coop(
        "status",
        "--check",
        env={"COOP_HOME": str(home), "COOP_STATUS_MAX_PENDING_AGE_S": "soon"},
    )
    assert result.returncode == 2
    assert "COOP_STATUS_MAX_PENDING_AGE_S" in result.stderr


def test_a_stale_take_is_listed(home, door):
    ledger.add_todo("long job", actor="builder")
    ledger.take_todo(1, actor="builder")
    out = coop(
        "status",
        env={"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door, "COOP_STALE_AFTER_S": "0.001"},
    ).stdout
    assert "stale: todo #1 [taken by builder," in out


def test_a_rotated_key_is_said_as_a_refused_key(home, door):
    """The door read its key when it started; the key file rotated since: the door answers
    401, which is a refused key to act on, not a door that is down."""
    write_key(home / "service.key", "rotated-key-0123456789abcdef")
    result = status(home, door, "--check")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    url = door
    assert f"door: refused this machine's service key at {url} (HTTP 401)" in lines
    assert "did not answer" not in result.stdout
    assert lines[-2:] == [
        f"needs a person: the door at {url} refused the service key (HTTP 401): the key this"
        " machine sends is not the door's; restart the services after rotating the key",
        "verdict: not healthy (1 problem above)",
    ]
    report = json.loads(status(home, door, "--json").stdout)
    assert (report["door"]["answered"], report["door"]["http_status"]) == (False, 401)
