"""What the database itself enforces, and what a failed transaction leaves behind: nothing."""

from __future__ import annotations

import sqlite3

import pytest

from engine import direct, store
from engine.errors import StoreError
from tests.support.ledger import ledger


def counts(db: str) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {
            t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("todos", "coop_events", "coop_outbox")
        }


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("UPDATE coop_events SET actor = 'someone else'", "append-only: events are never updated"),
        ("DELETE FROM coop_events", "append-only: events are never deleted"),
    ],
)
def test_a_raw_change_to_the_event_log_is_refused_by_the_database(db, statement, words):
    ledger.add_todo("t", actor="builder", db=db)
    conn = sqlite3.connect(db)
    try:
        with pytest.raises(sqlite3.IntegrityError, match=words):
            conn.execute(statement)
    finally:
        conn.close()
    assert counts(db)["coop_events"] == 1


def test_a_failing_outbox_insert_leaves_neither_the_change_nor_its_event(db):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TRIGGER refuse_outbox BEFORE INSERT ON coop_outbox"
            " BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    before = counts(db)
    with pytest.raises(StoreError, match="disk says no"):
        ledger.done_todo(1, actor="builder", result_summary="lost?", db=db)
    assert counts(db) == before
    assert ledger.list_items("todo", db=db)[0]["status"] == "taken"


def test_a_failure_after_the_outbox_insert_rolls_back_both(db):
    """The outbox row is in; then the transaction's next statement fails."""
    ledger.add_todo("t", actor="builder", db=db)
    with sqlite3.connect(db) as conn:
        # Fires on the read-back that follows the outbox insert in the same transaction.
        conn.execute(
            "CREATE TRIGGER fail_after AFTER INSERT ON coop_outbox"
            " BEGIN INSERT INTO no_such_table VALUES (1); END"
        )
    with pytest.raises(StoreError):
        ledger.abandon_todo(1, actor="builder", reason="r", db=db)
    assert counts(db) == {"todos": 1, "coop_events": 1, "coop_outbox": 0}


def test_migrations_are_recorded_and_reopening_is_a_no_op(db):
    with direct.connection(db) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        assert version == len(store.MIGRATIONS)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with direct.connection(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version


def test_a_request_has_a_todos_columns_plus_whom_it_is_for_its_choices_and_its_ask_key(db):
    """The two item tables are twins in migration 1 (`engine.store.schema`, written out in
    full: a migration is never edited); the verbs and `engine.store.ledger` read both alike."""
    store.open_connection(db).close()
    with sqlite3.connect(db) as conn:
        todos = [row[1:] for row in conn.execute("PRAGMA table_info(todos)")]
        requests = [row[1:] for row in conn.execute("PRAGMA table_info(requests)")]
    # whom it is for; the answers it offers; the key of the question the phone asked; its
    # deadline, default, reminders and urgency (migration 5)
    only_requests = ("addressed_to", "choices", "ask_key", "deadline_at", "default_choice")
    only_requests += ("remind_every_s", "remind_max", "urgent")
    assert [column for column in requests if column[0] not in only_requests] == todos
    assert ("addressed_to", "TEXT", 0, None, 0) in requests
    assert ("choices", "TEXT", 0, None, 0) in requests
    assert ("ask_key", "TEXT", 0, None, 0) in requests
