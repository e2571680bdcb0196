"""The schema the phone needs (issue 21), on real SQLite files: `requests.choices`,
`coop_outbox.extra` and `coop_answers`, added in place to a ledger of the schema before, and
fenced like every other table after `coop cutover`, also when the upgrade runs on a ledger
already in service mode."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from engine import store
from engine.store import queue, schema
from engine.store.schema import register_fence_function

#: The schema version before the phone's migration, found by what it adds (never a number).
BEFORE_PHONE = next(i for i, script in enumerate(schema.MIGRATIONS) if "coop_answers" in script)


def _old_ledger(path: Path, *, fenced: bool) -> None:
    """A coop.db at the schema before the phone, with a request and a pending outbox row, and
    the cutover's fence when `fenced`."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for number, script in enumerate(schema.MIGRATIONS[:BEFORE_PHONE], start=1):
            for statement in schema.statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
        conn.execute(
            "INSERT INTO requests (title, addressed_to, created_by, created_at, updated_at)"
            " VALUES ('old ask', 'owner', 'agent', '2026-01-01T00:00:00.000Z', 'x')"
        )
        conn.execute(
            "INSERT INTO coop_outbox (kind, text, created_at, next_attempt_at)"
            " VALUES ('note', 'old row', '2026-01-01T00:00:00.000Z', 0)"
        )
        if fenced:
            schema.install_fence(conn)


@pytest.mark.parametrize("fenced", [False, True], ids=["local", "service-mode"])
def test_an_old_ledger_upgrades_in_place(tmp_path: Path, fenced: bool) -> None:
    path = tmp_path / "coop.db"
    _old_ledger(path, fenced=fenced)
    with closing(store.open_connection(path)) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        assert version == len(schema.MIGRATIONS)
        request = conn.execute("SELECT title, choices FROM requests").fetchone()
        assert tuple(request) == ("old ask", None)
        (head,) = queue.due_run(conn, lambda: 0.0, 10)
        assert (head.text, head.extra) == ("old row", None)
        assert conn.execute("SELECT COUNT(*) FROM coop_answers").fetchone()[0] == 0
    if fenced:
        raw = sqlite3.connect(path)
        try:
            with pytest.raises(sqlite3.OperationalError, match="coop_owner_service_required"):
                raw.execute(
                    "INSERT INTO coop_answers (answer_key, request_id, outcome, detail, at)"
                    " VALUES ('a-1', 1, 'closed', 'd', 'x')"
                )
        finally:
            raw.close()
        with closing(register_fence_function(store.open_connection(path))) as conn:
            names = schema.fence_triggers(conn)
        assert len(names) == len(schema.FENCED_TABLES) * len(schema.FENCED_OPERATIONS)


def test_a_ledger_in_local_mode_gets_no_fence_from_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "coop.db"
    _old_ledger(path, fenced=False)
    with closing(store.open_connection(path)) as conn:
        assert schema.fence_triggers(conn) == []
