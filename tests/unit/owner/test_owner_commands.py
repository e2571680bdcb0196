"""The owner's command log on a real SQLite file: once per key, filed with the change."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import owner, store, verbs
from engine.config import EngineConfig
from engine.errors import LifecycleError, NotFound
from engine.owner import commands, compat


@pytest.fixture
def conn(home: Path) -> Iterator[sqlite3.Connection]:
    connection = owner.register_fence_function(store.open_connection(home / "coop.db"))
    try:
        yield connection
    finally:
        connection.close()


def _run(conn: sqlite3.Connection, key: str, method: str, *args, **kwargs) -> commands.Filed:
    return commands.run(
        conn,
        key=key,
        method=method,
        args=list(args),
        kwargs=kwargs,
        digest=compat.input_digest(method, list(args), kwargs),
        metadata={"pid": 1},
    )


def _count(conn: sqlite3.Connection, table: str) -> int:
    return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_the_same_key_runs_once_and_answers_the_filed_outcome(conn: sqlite3.Connection) -> None:
    first = _run(conn, "key-0001", "add_todo", "write the report", actor="agent")
    again = _run(conn, "key-0001", "add_todo", "write the report", actor="agent")

    assert first.outcome == again.outcome == "committed"
    assert (first.replayed, again.replayed) == (False, True)
    assert again.result == first.result
    assert _count(conn, "todos") == 1
    assert _count(conn, "coop_commands") == 1
    row = commands.lookup(conn, "key-0001")
    assert (row["method"], row["actor"], row["outcome"]) == ("add_todo", "agent", "committed")


def test_the_same_key_with_another_input_is_refused(conn: sqlite3.Connection) -> None:
    _run(conn, "key-0001", "add_todo", "write the report", actor="agent")

    with pytest.raises(commands.KeyConflict, match="already filed for another input"):
        _run(conn, "key-0001", "add_todo", "something else", actor="agent")
    assert _count(conn, "todos") == 1


def test_a_domain_refusal_is_filed_with_its_type_and_words_and_changes_nothing(
    conn: sqlite3.Connection,
) -> None:
    _run(conn, "key-0001", "add_todo", "write the report", actor="agent")
    _run(conn, "key-0002", "take_todo", 1, actor="agent")
    events_before = _count(conn, "coop_events")

    refused = _run(conn, "key-0003", "done_todo", 1, actor="reviewer")
    missing = _run(conn, "key-0004", "take_todo", 99, actor="reviewer")

    assert refused.outcome == "rejected"
    assert refused.error_type == "LifecycleError"
    unit = verbs.Unit(tx=lambda: conn, config=EngineConfig.from_env)
    with pytest.raises(LifecycleError) as local, store.write(conn):
        verbs.ledger.done_todo(unit, 1, actor="reviewer")
    assert refused.error_message == str(local.value)
    assert (missing.error_type, missing.error_message) == (
        NotFound.__name__,
        "todo #99 does not exist — `coop list --all` shows the ids",
    )
    assert _count(conn, "coop_events") == events_before
    assert _count(conn, "coop_outbox") == 0
    assert conn.execute("SELECT status FROM todos WHERE id = 1").fetchone()[0] == "taken"
    assert _run(conn, "key-0003", "done_todo", 1, actor="reviewer").replayed


def test_reads_are_filed_without_their_answer_and_replay_by_reading_again(
    conn: sqlite3.Connection,
) -> None:
    _run(conn, "key-0001", "add_todo", "write the report", actor="agent")
    listed = _run(conn, "key-0002", "list_items")

    assert [item["title"] for item in listed.result] == ["write the report"]
    assert commands.lookup(conn, "key-0002")["result"] is None
    assert _run(conn, "key-0002", "list_items").result == listed.result


def test_reconcile_answers_a_filed_key_and_fences_off_an_unknown_one(
    conn: sqlite3.Connection,
) -> None:
    _run(conn, "key-0001", "add_todo", "write the report", actor="agent")

    assert commands.reconcile(conn, "key-0001")["outcome"] == "committed"
    unknown = commands.reconcile(conn, "key-0009")
    assert (unknown["found"], unknown["outcome"]) == (False, "never_arrived")
    # A late copy of the request that never arrived must not run after the reconcile said so.
    with pytest.raises(commands.KeyConflict, match="never arrived"):
        _run(conn, "key-0009", "add_todo", "late", actor="agent")
    assert _count(conn, "todos") == 1
    assert commands.reconcile(conn, "key-0009")["outcome"] == "never_arrived"


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "words"),
    [
        ("drop_everything", [], {}, "not a Coop operation"),
        ("add_todo", [], {"actor": "agent"}, "missing a required argument"),
        ("add_todo", ["x"], {"actor": "agent", "colour": "red"}, "unexpected keyword"),
        ("add_todo", ["x"], {"actor": "agent", "db": "/tmp/other.db"}, "its own database"),
    ],
)
def test_an_unknown_method_or_bad_arguments_are_refused_before_running(
    conn: sqlite3.Connection, method: str, args: list, kwargs: dict, words: str
) -> None:
    with pytest.raises(commands.CommandRefused, match=words):
        commands.run(
            conn,
            key="key-0001",
            method=method,
            args=args,
            kwargs=kwargs,
            digest=compat.input_digest(method, args, kwargs),
            metadata={},
        )
    assert _count(conn, "coop_commands") == 0
