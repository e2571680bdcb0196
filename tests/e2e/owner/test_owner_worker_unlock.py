"""`coop worker unlock --reason TEXT`: the owner clears a worker lock nothing else may clear (a
holder on another host can never be proven gone), recorded as an event; in local mode and
routed to the owner service after a cutover."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from engine import direct
from engine import store as engine_store
from tests.e2e.owner.conftest import ServeProcess, ok, run_coop

FOREIGN = ("drain-elsewhere-4242-deadbeef", 4242, "another-host", 1.0, "2026-11-30T08:00:00.000Z")


def _plant_foreign_lock(db: Path) -> None:
    with direct.connection(db) as conn, engine_store.write(conn):
        conn.execute(
            "INSERT INTO worker_lock (singleton, owner, pid, host, started_at, acquired_at)"
            " VALUES (1, ?, ?, ?, ?, ?)",
            FOREIGN,
        )


def _raw(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)  # a raw reader: the fence refuses writes only
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _unlock_events(db: Path) -> list[tuple[str, dict]]:
    return [
        (actor, json.loads(payload))
        for actor, payload in _raw(
            db,
            "SELECT actor, payload FROM coop_events"
            " WHERE item_kind = 'worker_lock' AND event = 'unlock' ORDER BY id",
        )
    ]


@pytest.fixture
def local_env(stack_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    engine_store.open_connection(tmp_path / "coop.db").close()
    return {**stack_env, "COOP_ACTOR": "owner"}


def test_the_owner_clears_a_lock_held_from_another_host_and_the_event_says_why(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    db = tmp_path / "coop.db"
    _plant_foreign_lock(db)
    out = ok(local_env, "worker", "unlock", "--reason", "that host was retired")
    assert out.count("\n") == 1
    assert "drain-elsewhere-4242-deadbeef" in out
    assert "another-host" in out
    assert _raw(db, "SELECT * FROM worker_lock") == []
    [(actor, payload)] = _unlock_events(db)
    assert actor == "owner"
    assert payload["reason"] == "that host was retired"
    assert payload["holder"]["host"] == "another-host"
    assert payload["holder"]["pid"] == 4242
    again = ok(local_env, "worker", "unlock", "--reason", "again")
    assert "already free" in again
    assert len(_unlock_events(db)) == 1  # nothing cleared, nothing recorded


def test_unlock_refuses_anyone_but_the_owner_and_a_missing_reason_in_one_line(
    local_env: dict[str, str], tmp_path: Path
) -> None:
    db = tmp_path / "coop.db"
    _plant_foreign_lock(db)
    stranger = run_coop({**local_env, "COOP_ACTOR": "agent"}, "worker", "unlock", "--reason", "x")
    assert stranger.returncode == 1
    assert stranger.stderr.count("\n") == 1
    assert "only the owner (owner)" in stranger.stderr
    bare = run_coop(local_env, "worker", "unlock")
    assert bare.returncode == 2
    assert bare.stderr.count("\n") == 1
    assert "--reason" in bare.stderr
    assert len(_raw(db, "SELECT * FROM worker_lock")) == 1
    assert _unlock_events(db) == []
    helped = run_coop(local_env, "worker", "unlock", "--help")
    assert helped.returncode == 0
    assert "--reason" in helped.stdout


def test_unlock_is_routed_to_the_owner_service_after_a_cutover(
    serve: ServeProcess, local_env: dict[str, str], tmp_path: Path
) -> None:
    db = tmp_path / "coop.db"
    _plant_foreign_lock(db)
    serve.start()
    assert "installed the fence" in ok(local_env, "cutover")
    out = ok(local_env, "worker", "unlock", "--reason", "retired host, via the owner")
    assert "drain-elsewhere-4242-deadbeef" in out
    assert _raw(db, "SELECT owner FROM worker_lock WHERE host = 'another-host'") == []
    [(actor, payload)] = _unlock_events(db)
    assert (actor, payload["reason"]) == ("owner", "retired host, via the owner")
    methods = _raw(db, "SELECT method, outcome FROM coop_commands WHERE method = 'unlock_worker'")
    assert methods == [("unlock_worker", "committed")]
    assert serve.terminate() == 0
