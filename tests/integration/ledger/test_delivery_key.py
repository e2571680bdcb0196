"""The outbox row's delivery key, on real SQLite files: the identity the door deduplicates by.

No restore, fresh ledger or second ledger may ever produce a key again, so a key is random and
never derived from the row id; every writer gets one, the engine's producers and a bare INSERT
alike; and a file written by the previous schema keeps the keys the door has already seen.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import store
from engine.store import queue, schema
from engine.store.schema import DELIVERY_KEY_PREFIX, register_fence_function
from tests.support.ledger import ledger, outbox

# The door's own rule for an outbox id (chief.door.router `OutboxId`).
DOOR_OUTBOX_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
SCHEMA_BEFORE_KEYS = 2


def _write(path: Path, count: int) -> dict[int, str]:
    """`count` rows through the producers' `enqueue`, one transaction each: id -> key."""
    with closing(store.open_connection(path)) as conn:
        for n in range(count):
            with store.write(conn):
                queue.enqueue(conn, "note", f"row {n}")
        return dict(conn.execute("SELECT id, delivery_key FROM coop_outbox").fetchall())


@settings(max_examples=25, deadline=None)
@given(count=st.integers(min_value=1, max_value=12))
def test_keys_are_unique_across_ledgers_and_never_the_id(count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        first = _write(Path(folder) / "first.db", count)
        second = _write(Path(folder) / "second.db", count)  # the same ids, a fresh ledger
    assert sorted(first) == sorted(second) == list(range(1, count + 1))
    keys = [*first.values(), *second.values()]
    assert len(set(keys)) == len(keys)
    for outbox_id, key in [*first.items(), *second.items()]:
        assert DOOR_OUTBOX_ID.fullmatch(key), key
        assert str(outbox_id) not in (key, key.split("-", 1)[-1])


def test_a_restored_copy_gives_its_next_row_a_new_key(tmp_path: Path) -> None:
    original = tmp_path / "coop.db"
    _write(original, 2)
    with (
        closing(sqlite3.connect(original)) as source,
        closing(sqlite3.connect(tmp_path / "copy.db")) as target,
    ):
        source.backup(target)
    later = _write(original, 1)  # row 3 of the original...
    restored = _write(tmp_path / "copy.db", 1)  # ...and row 3 of the restored copy
    assert (later[1], later[2]) == (restored[1], restored[2])
    assert later[3] != restored[3]


def test_every_verb_that_queues_a_line_writes_its_key(db: str) -> None:
    todo = ledger.add_todo("water the plants", actor="builder", db=db)["todo"]
    ledger.done_todo(todo["id"], actor="builder", result_summary="watered", db=db)
    request = ledger.add_request("review it", actor="builder", addressed_to="chief", db=db)
    ledger.close_request(request["request"]["id"], actor="chief", db=db)
    outbox.notify("a note", actor="builder", db=db)
    rows = outbox.rows(db=db)
    assert len(rows) == 3
    assert len({row["delivery_key"] for row in rows}) == 3
    assert all(DOOR_OUTBOX_ID.fullmatch(row["delivery_key"]) for row in rows), rows
    assert all(row["delivery_key"].startswith(DELIVERY_KEY_PREFIX) for row in rows), rows


def test_a_row_written_without_a_key_gets_one(tmp_path: Path) -> None:
    """A script's INSERT, or an older engine's, still gets a key of the same shape."""
    with closing(store.open_connection(tmp_path / "coop.db")) as conn:
        conn.execute(
            "INSERT INTO coop_outbox (kind, text, created_at, next_attempt_at)"
            " VALUES ('note', 'by hand', '2026-01-01T00:00:00.000Z', 0)"
        )
        with store.write(conn):
            queue.enqueue(conn, "note", "by the engine")
        keys = [r[0] for r in conn.execute("SELECT delivery_key FROM coop_outbox ORDER BY id")]
    assert all(DOOR_OUTBOX_ID.fullmatch(key) for key in keys), keys
    assert (len(keys[0]), keys[0][:2]) == (len(keys[1]), keys[1][:2])
    assert keys[0] != keys[1]


def test_two_rows_cannot_share_a_key(tmp_path: Path) -> None:
    with closing(store.open_connection(tmp_path / "coop.db")) as conn:
        with store.write(conn):
            queue.enqueue(conn, "note", "first")
        (key,) = conn.execute("SELECT delivery_key FROM coop_outbox").fetchone()
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(
                "INSERT INTO coop_outbox (kind, text, created_at, next_attempt_at, delivery_key)"
                " VALUES ('note', 'second', '2026-01-01T00:00:00.000Z', 0, ?)",
                (key,),
            )


def _old_ledger(path: Path, rows: int, *, fenced: bool = False) -> None:
    """A coop.db at the schema before the delivery key, with `rows` rows (the first delivered,
    the rest pending), and the cutover's fence when `fenced`."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for number, script in enumerate(schema.MIGRATIONS[:SCHEMA_BEFORE_KEYS], start=1):
            for statement in schema.statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
        for n in range(rows):
            conn.execute(
                "INSERT INTO coop_outbox (kind, text, state, created_at, next_attempt_at)"
                " VALUES ('note', ?, ?, '2026-01-01T00:00:00.000Z', 0)",
                (f"old {n}", "delivered" if n == 0 else "pending"),
            )
        if fenced:
            schema.install_fence(conn)


@pytest.mark.parametrize("fenced", [False, True], ids=["local", "service-mode"])
def test_an_upgrade_keeps_the_keys_the_door_has_seen(tmp_path: Path, fenced: bool) -> None:
    path = tmp_path / "coop.db"
    _old_ledger(path, 3, fenced=fenced)
    with closing(store.open_connection(path)) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        assert version == len(schema.MIGRATIONS)
        old = dict(conn.execute("SELECT id, delivery_key FROM coop_outbox").fetchall())
        assert old == {1: "1", 2: "2", 3: "3"}  # what the previous notifier sent as outbox_id
        assert [h.delivery_key for h in queue.due_run(conn, lambda: 0.0, 10)] == ["2", "3"]
        register_fence_function(conn)  # a writer in service mode is the owner's
        with store.write(conn):
            queue.enqueue(conn, "note", "after the upgrade")
        (new,) = conn.execute("SELECT delivery_key FROM coop_outbox WHERE id = 4").fetchone()
    assert new not in old.values()
    assert DOOR_OUTBOX_ID.fullmatch(new)
    if fenced:
        with closing(store.open_connection(path)) as conn:
            assert schema.fence_triggers(conn)  # the upgrade left the fence in place
