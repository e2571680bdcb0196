"""The fence: while installed, only a connection with the owner's SQL function writes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import owner, store
from engine.store import schema

WRITES = {
    "todos": (
        "INSERT INTO todos (title, created_by, created_at, updated_at) VALUES ('t', 'a', 'x', 'x')",
        "UPDATE todos SET title = 'u'",
        "DELETE FROM todos",
    ),
    "requests": (
        "INSERT INTO requests (title, created_by, created_at, updated_at)"
        " VALUES ('t', 'a', 'x', 'x')",
        "UPDATE requests SET title = 'u'",
        "DELETE FROM requests",
    ),
    "coop_events": (
        "INSERT INTO coop_events (item_kind, item_id, event, actor, at)"
        " VALUES ('todo', 1, 'add', 'a', 'x')",
    ),
    "coop_outbox": (
        "INSERT INTO coop_outbox (kind, text, created_at, next_attempt_at)"
        " VALUES ('note', 't', 'x', 0)",
        "UPDATE coop_outbox SET state = 'delivered'",
        "DELETE FROM coop_outbox",
    ),
    "worker_lock": (
        "INSERT INTO worker_lock (singleton, owner, pid, host, acquired_at)"
        " VALUES (1, 'w', 1, 'h', 'x')",
        "UPDATE worker_lock SET pid = 2",
        "DELETE FROM worker_lock",
    ),
    "coop_commands": (
        "INSERT INTO coop_commands (key, method, input_sha256, outcome, filed_at)"
        " VALUES ('k', 'm', 'd', 'committed', 'x')",
        "UPDATE coop_commands SET outcome = 'rejected'",
        "DELETE FROM coop_commands",
    ),
    "coop_answers": (
        "INSERT INTO coop_answers (answer_key, request_id, outcome, detail, at)"
        " VALUES ('a-1', 1, 'closed', 'd', 'x')",
        "UPDATE coop_answers SET outcome = 'noted'",
        "DELETE FROM coop_answers",
    ),
}
#: Every write to every fenced table: the fence covers each table the schema has.
TRIGGERS = len(WRITES) * 3


def test_every_fenced_table_has_its_writes_listed_here() -> None:
    assert set(WRITES) == set(schema.FENCED_TABLES)


def _fenced(path: Path) -> None:
    conn = owner.register_fence_function(store.open_connection(path))
    try:
        with store.write(conn):
            assert len(store.install_fence(conn)) == TRIGGERS
    finally:
        conn.close()


@pytest.mark.parametrize(
    "statement", [sql for table in sorted(WRITES) for sql in WRITES[table]], ids=str
)
def test_a_raw_writer_is_refused_naming_the_owner_service(home: Path, statement: str) -> None:
    path = home / "coop.db"
    _fenced(path)
    raw = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="coop_owner_service_required"):
            raw.execute(statement)
        assert raw.execute("SELECT COUNT(*) FROM todos").fetchone()[0] == 0  # reads still work
    finally:
        raw.close()


@pytest.fixture
def owners_connection(home: Path) -> Iterator[sqlite3.Connection]:
    """The owner's connection (fence function registered) to a fenced ledger."""
    path = home / "coop.db"
    _fenced(path)
    conn = owner.register_fence_function(store.open_connection(path))
    try:
        yield conn
    finally:
        conn.close()


def test_the_owners_connection_writes_through_the_fence(
    owners_connection: sqlite3.Connection,
) -> None:
    for table in sorted(WRITES):
        for statement in WRITES[table][:1]:
            owners_connection.execute(statement)
    assert owners_connection.execute("SELECT COUNT(*) FROM coop_commands").fetchone()[0] == 1


def test_removing_the_fence_lets_every_writer_back_in(
    home: Path, owners_connection: sqlite3.Connection
) -> None:
    with store.write(owners_connection):
        assert len(store.remove_fence(owners_connection)) == TRIGGERS
    assert store.fence_triggers(owners_connection) == []
    raw = sqlite3.connect(home / "coop.db")
    try:
        raw.execute(WRITES["todos"][0])
        raw.commit()
    finally:
        raw.close()


def test_a_fenced_write_inside_a_verb_is_a_store_error(home: Path) -> None:
    from engine import ledger
    from engine.errors import StoreError

    _fenced(home / "coop.db")
    with pytest.raises(StoreError, match="no such function: coop_owner_service_required"):
        ledger.add_todo("written around the owner", actor="agent")
