"""Every transition of both lifecycles against a real SQLite file, legal and refused, with the
refusal words, the events each writes and the outbox rows each reports."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from engine.errors import LifecycleError, NotFound, UsageError
from tests.support.ledger import ledger, outbox


def events(db: str, kind: str, item_id: int) -> list[tuple[str, str, dict | None]]:
    return [
        (e["event"], e["actor"], json.loads(e["payload"]) if e["payload"] else None)
        for e in ledger.history(kind, item_id, db=db)
    ]


def outbox_rows(db: str) -> list[sqlite3.Row]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM coop_outbox ORDER BY id").fetchall()


def snapshot(db: str) -> tuple:
    with sqlite3.connect(db) as conn:
        return tuple(
            tuple(conn.execute(f"SELECT * FROM {t} ORDER BY id").fetchall())
            for t in ("todos", "requests", "coop_events", "coop_outbox")
        )


def test_add_take_release_take_done_todo(db):
    todo = ledger.add_todo("Fix the gate", actor="builder", db=db)["todo"]
    assert todo["status"] == "open"
    assert ledger.take_todo(todo["id"], actor="builder", db=db)["todo"]["taken_by"] == "builder"
    released = ledger.release_todo(todo["id"], actor="builder", reason="lunch", db=db)["todo"]
    assert (released["status"], released["taken_by"]) == ("open", None)
    ledger.take_todo(todo["id"], actor="builder", db=db)
    done = ledger.done_todo(
        todo["id"], actor="builder", result_summary="oiled", commit_sha="abc123", db=db
    )
    row = done["todo"]
    assert (row["status"], row["closed_by"], row["result_summary"], row["commit_sha"]) == (
        "done",
        "builder",
        "oiled",
        "abc123",
    )
    assert [e[0] for e in events(db, "todo", todo["id"])] == [
        "add",
        "take",
        "release",
        "take",
        "done",
    ]
    (note,) = outbox_rows(db)
    assert note["id"] == done["outbox_id"]
    assert (note["kind"], note["state"], note["source"]) == ("todo_done", "pending", "todo:1")
    assert "todo #1 done by builder: Fix the gate" in note["text"]
    assert "oiled" in note["text"]
    assert "abc123" in note["text"]


def test_open_to_done_is_the_legal_fast_path(db):
    ledger.add_todo("Two-line fix", actor="builder", db=db)
    row = ledger.done_todo(1, actor="builder", db=db)["todo"]
    assert (row["status"], row["taken_by"], row["closed_by"]) == ("done", "builder", "builder")
    assert events(db, "todo", 1)[-1] == ("done", "builder", {"fast_path": True})


def test_retaking_your_own_row_refreshes_it_as_a_take(db):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    assert [e[0] for e in events(db, "todo", 1)] == ["add", "take", "take"]


@pytest.mark.parametrize("status_verb", ["done", "abandon"])
def test_a_terminal_todo_is_never_retaken(db, status_verb):
    ledger.add_todo("t", actor="builder", db=db)
    if status_verb == "done":
        ledger.done_todo(1, actor="builder", db=db)
        word = "done"
    else:
        ledger.abandon_todo(1, actor="builder", reason="obsolete", db=db)
        word = "abandoned"
    before = snapshot(db)
    with pytest.raises(LifecycleError) as caught:
        ledger.take_todo(1, actor="builder", force=True, db=db)
    assert str(caught.value) == f"todo #1 is {word} — terminal rows are never re-taken"
    assert snapshot(db) == before


def test_a_foreign_take_is_refused_naming_the_holder_and_since_when(db):
    ledger.add_todo("t", actor="builder", db=db)
    taken_at = ledger.take_todo(1, actor="builder", db=db)["todo"]["taken_at"]
    before = snapshot(db)
    with pytest.raises(LifecycleError) as caught:
        ledger.take_todo(1, actor="reviewer", db=db)
    since = f"{taken_at[:10]} {taken_at[11:16]} UTC"
    assert str(caught.value) == (
        f"todo #1 is already taken by builder (since {since}) — --force to take it over"
    )
    assert snapshot(db) == before


def test_forced_takeover_is_never_quiet(db):
    ledger.add_todo("Fix the gate", actor="builder", db=db)
    taken_at = ledger.take_todo(1, actor="builder", db=db)["todo"]["taken_at"]
    result = ledger.take_todo(1, actor="reviewer", force=True, db=db)
    assert result["todo"]["taken_by"] == "reviewer"
    assert events(db, "todo", 1)[-1] == (
        "takeover",
        "reviewer",
        {"previous": "builder", "previous_at": taken_at},
    )
    (note,) = outbox_rows(db)
    assert note["id"] == result["outbox_id"]
    assert note["kind"] == "takeover"
    assert "taken over by reviewer from builder" in note["text"]


@pytest.mark.parametrize(
    ("verb", "call"),
    [
        ("done", lambda db, **kw: ledger.done_todo(1, actor="reviewer", db=db, **kw)),
        (
            "abandon",
            lambda db, **kw: ledger.abandon_todo(1, actor="reviewer", reason="r", db=db, **kw),
        ),
    ],
)
def test_only_the_taker_finishes_a_todo_without_force(db, verb, call):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    before = snapshot(db)
    with pytest.raises(LifecycleError, match=f"taken by builder .* — only the taker may {verb}"):
        call(db)
    assert snapshot(db) == before
    row = call(db, force=True)["todo"]
    assert row["closed_by"] == "reviewer"
    assert events(db, "todo", 1)[-1][2]["forced_from"] == "builder"


def test_release_of_an_open_todo_is_refused(db):
    ledger.add_todo("t", actor="builder", db=db)
    with pytest.raises(LifecycleError, match=r"todo #1 is open — only a taken todo can be"):
        ledger.release_todo(1, actor="builder", reason="r", db=db)


def test_releasing_another_actors_take_needs_the_owner_or_chief_and_a_reason(db):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    with pytest.raises(LifecycleError) as caught:
        ledger.release_todo(1, actor="reviewer", reason="looks stale", db=db)
    assert str(caught.value) == (
        "todo #1 is taken by builder — only builder, the owner (owner) or the chief proxy"
        " (chief) may release it"
    )
    ledger.release_todo(1, actor="chief", reason="builder's session is gone", db=db)
    assert events(db, "todo", 1)[-1] == (
        "release",
        "chief",
        {"decided_by": "chief", "holder": "builder", "reason": "builder's session is gone"},
    )


def test_first_close_is_the_record_and_a_repeat_only_amends(db):
    ledger.add_todo("t", actor="builder", db=db)
    first = ledger.done_todo(1, actor="builder", result_summary="first", db=db)["todo"]
    amended = ledger.done_todo(
        1, actor="builder", result_summary="better", commit_sha="beef", db=db
    )
    row = amended["todo"]
    assert amended["changed"] is True
    assert outbox_rows(db)[-1]["id"] == amended["outbox_id"]  # the Chief is told (issue 34)
    assert (row["closed_by"], row["closed_at"], row["status"]) == (
        first["closed_by"],
        first["closed_at"],
        "done",
    )
    assert (row["result_summary"], row["commit_sha"]) == ("better", "beef")
    assert events(db, "todo", 1)[-1] == (
        "edit",
        "builder",
        {
            "fields": ["commit_sha", "result_summary"],
            "previous": {"commit_sha": None, "result_summary": "first"},
            "now": {"commit_sha": "beef", "result_summary": "better"},
        },
    )
    before = snapshot(db)
    repeat = ledger.done_todo(1, actor="builder", result_summary="better", commit_sha="beef", db=db)
    assert repeat["changed"] is False
    assert snapshot(db) == before
    assert [r["kind"] for r in outbox_rows(db)] == ["todo_done", "todo_amended"]


def test_a_stranger_cannot_amend_a_closed_row(db):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.done_todo(1, actor="builder", db=db)
    with pytest.raises(LifecycleError, match="only they or the owner may amend"):
        ledger.done_todo(1, actor="reviewer", result_summary="mine now", db=db)
    closer = ledger.done_todo(1, actor="owner", result_summary="noted", db=db)["todo"]
    assert closer["closed_by"] == "builder"


def test_an_abandoned_todo_becomes_done_only_by_the_owner_with_force(db):
    ledger.add_todo("t", actor="builder", db=db)
    ledger.abandon_todo(1, actor="builder", reason="blocked upstream", db=db)
    refusal = "todo #1 is abandoned — only the owner (owner), with --force, may record it done"
    for actor, force in (("builder", False), ("builder", True), ("owner", False)):
        with pytest.raises(LifecycleError, match=re.escape(refusal)):
            ledger.done_todo(1, actor=actor, force=force, db=db)
    result = ledger.done_todo(1, actor="owner", force=True, db=db)
    assert result["todo"]["status"] == "done"
    assert events(db, "todo", 1)[-1] == ("done", "owner", {"previous_status": "abandoned"})
    assert [r["kind"] for r in outbox_rows(db)] == ["todo_abandoned", "todo_done"]


def test_abandon_needs_a_reason_and_reports_it(db):
    ledger.add_todo("t", actor="builder", db=db)
    with pytest.raises(UsageError, match="abandon needs a reason"):
        ledger.abandon_todo(1, actor="builder", reason="", db=db)
    ledger.abandon_todo(1, actor="builder", reason="superseded by #2", db=db)
    (note,) = outbox_rows(db)
    assert note["kind"] == "todo_abandoned"
    assert "reason: superseded by #2" in note["text"]


def test_request_lifecycle_with_address_and_fast_close(db):
    req = ledger.add_request("Review the door", actor="owner", addressed_to="reviewer", db=db)
    assert req["request"]["addressed_to"] == "reviewer"
    ledger.take_request(1, actor="reviewer", db=db)
    ledger.release_request(1, actor="reviewer", db=db)
    closed = ledger.close_request(1, actor="reviewer", result_summary="fine", db=db)
    assert closed["request"]["status"] == "closed"
    ledger.add_request("Quick one", actor="owner", db=db)
    fast = ledger.close_request(2, actor="owner", db=db)["request"]
    assert (fast["status"], fast["closed_by"]) == ("closed", "owner")
    assert [r["kind"] for r in outbox_rows(db)] == ["request_closed", "request_closed"]
    with pytest.raises(LifecycleError, match="request #1 is closed — terminal rows are never"):
        ledger.take_request(1, actor="reviewer", db=db)


def test_request_close_repeat_amends_like_todo_done(db):
    ledger.add_request("r", actor="owner", db=db)
    ledger.close_request(1, actor="owner", db=db)
    again = ledger.close_request(1, actor="owner", commit_sha="f00d", db=db)
    assert (again["changed"], again["request"]["commit_sha"]) == (True, "f00d")
    assert [e[0] for e in events(db, "request", 1)] == ["add", "close", "edit"]


def test_unknown_ids_and_empty_titles_are_usage_errors(db):
    with pytest.raises(NotFound, match=r"todo #9 does not exist"):
        ledger.take_todo(9, actor="builder", db=db)
    with pytest.raises(NotFound, match=r"request #4 does not exist"):
        ledger.close_request(4, actor="builder", db=db)
    with pytest.raises(UsageError, match="the title is empty"):
        ledger.add_todo("   ", actor="builder", db=db)


def test_listing_shows_takes_and_marks_stale_ones(db):
    ledger.add_todo("mine", actor="builder", db=db)
    ledger.add_request("yours", actor="owner", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    ledger.add_todo("finished", actor="builder", db=db)
    ledger.done_todo(2, actor="builder", db=db)
    items = ledger.list_items(db=db)
    assert [(i["kind"], i["id"], i["stale"]) for i in items] == [
        ("todo", 1, False),
        ("request", 1, False),
    ]
    assert len(ledger.list_items(include_closed=True, db=db)) == 3
    impatient = ledger.with_settings(stale_after_s=0.000001)
    assert impatient.list_items("todo", db=db)[0]["stale"] is True
    # No auto-reap: a stale take stays taken until someone decides.
    assert ledger.list_items("todo", db=db)[0]["taken_by"] == "builder"


def test_explicit_notify_is_an_outbox_row_and_an_event(db):
    result = outbox.notify("the backup finished", actor="cron", kind="backup", db=db)
    (row,) = outbox_rows(db)
    assert (row["id"], row["kind"], row["text"]) == (result["outbox_id"], "backup", row["text"])
    with pytest.raises(UsageError, match="kind"):
        outbox.notify("x", actor="cron", kind="Not A Kind", db=db)
    assert len(outbox_rows(db)) == 1


def test_long_notification_text_is_cut_at_write_time(db):
    outbox.notify("z" * 9000, actor="cron", db=db)
    (row,) = outbox_rows(db)
    assert len(row["text"]) == 4000
    assert "cut by coop: 9000 characters" in row["text"]


def test_operator_cancel_and_retry_of_outbox_rows(db):
    outbox.notify("one", actor="cron", db=db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE coop_outbox SET next_attempt_at = next_attempt_at + 3600")
    outbox.retry(1, actor="owner", db=db)
    (row,) = outbox_rows(db)
    assert row["next_attempt_at"] < __import__("time").time() + 1
    with pytest.raises(UsageError, match="cancel needs a reason"):
        outbox.cancel(1, actor="owner", reason="", db=db)
    outbox.cancel(1, actor="owner", reason="duplicate of #2", db=db)
    (row,) = outbox_rows(db)
    assert (row["state"], row["cancelled_by"], row["cancel_reason"]) == (
        "cancelled",
        "owner",
        "duplicate of #2",
    )
    with pytest.raises(LifecycleError, match="only a pending row can be retried"):
        outbox.retry(1, actor="owner", db=db)
