"""People's words where a person reads the ledger (issue 34, item 10), through the real verbs
on a real SQLite file and the CLI's own render: an event's durations in words (`remind every:
30 min`, `0.1 s late`, never `remind every s: 1800` or `late s: 0.08`), an amendment as one
(`summary "a" → "b"`, never `fields: result_summary`), a close on the fast path shown once
(no `taken: … by deadline` for a request nobody took), and a deadline's default named by its
choice without a clash (`if no answer: no`, never `(no if no answer)`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine import store, verbs
from engine.cli import render
from engine.verbs.deadline import apply_deadline
from tests.support.ledger import SETTINGS, ledger


def deadline_now(db: str, request_id: int, now_s: float) -> None:
    """The ledger's deadline decision, as the notifier daemon runs it."""
    config = SETTINGS._replace(db_path=Path(db))
    with store.unit_of_work(Path(db), writing=True) as tx:
        apply_deadline(verbs.Unit(tx=tx, config=lambda: config), request_id, now_s)


def shown(db: str, request_id: int) -> list[str]:
    return render.answer("request", ledger.show_request(request_id, db=db), None, {})


def history(db: str, request_id: int) -> list[str]:
    return render.listing(ledger.history("request", request_id, db=db))


def asked(db: str) -> dict:
    return ledger.add_request(
        "pay the plumber?",
        actor="agent",
        addressed_to="owner",
        choices="yes,no",
        deadline="2h",
        default="no",
        remind="30m",
        db=db,
    )["request"]


def test_an_events_durations_read_as_durations(db: str) -> None:
    row = asked(db)
    deadline_now(db, 1, row["deadline_at"] + 0.08)
    add, close = history(db, 1)
    assert "remind every: 30 min" in add, add
    assert "remind every s" not in add, add
    assert "0.1 s late" in close, close
    assert "late s" not in close, close


def test_a_deadline_default_is_named_by_its_choice_without_a_clash(db: str) -> None:
    asked(db)
    (deadline,) = [line for line in shown(db, 1) if line.startswith("  deadline:")]
    assert deadline.endswith("(if no answer: no)"), deadline
    ledger.add_request("anyone?", actor="agent", deadline="90s", db=db)
    (deadline,) = [line for line in shown(db, 2) if line.startswith("  deadline:")]
    assert deadline.endswith("(if no answer: abandoned)"), deadline


def test_a_fast_close_shows_its_closer_once_not_as_a_taker(db: str) -> None:
    row = asked(db)
    deadline_now(db, 1, row["deadline_at"] + 1)
    lines = shown(db, 1)
    assert not any(line.startswith("  taken:") for line in lines), lines
    assert any(line.startswith("  closed:") and line.endswith("by deadline") for line in lines)
    ledger.add_request("a taken one", actor="agent", db=db)
    ledger.take_request(2, actor="builder", db=db)
    ledger.close_request(2, actor="builder", db=db)
    assert any(line.startswith("  taken:") for line in shown(db, 2))


def test_a_take_and_a_close_in_one_millisecond_still_show_the_take(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger's clock has millisecond steps: a script's take and close can share one. The
    take is still named (its own event says so), not read as a close straight from open."""
    monkeypatch.setattr(store, "now_iso", lambda: "2026-12-06T04:00:00.000Z")
    ledger.add_request("a quick one", actor="agent", db=db)
    ledger.take_request(1, actor="builder", db=db)
    ledger.close_request(1, actor="builder", db=db)
    assert any(line.startswith("  taken:") for line in shown(db, 1)), shown(db, 1)
    ledger.add_request("straight to closed", actor="agent", db=db)
    ledger.close_request(2, actor="builder", db=db)
    assert not any(line.startswith("  taken:") for line in shown(db, 2)), shown(db, 2)


def test_an_amendment_in_the_history_reads_as_one(db: str) -> None:
    ledger.add_request("r", actor="agent", db=db)
    ledger.close_request(1, actor="agent", result_summary="a", db=db)
    ledger.close_request(1, actor="agent", result_summary="b", db=db)
    edit = history(db, 1)[-1]
    assert edit.endswith('summary "a" → "b"'), edit
    assert "result_summary" not in edit, edit


def test_a_stored_time_in_an_event_reads_as_a_time(db: str) -> None:
    ledger.add_todo("fix the gate", actor="builder", db=db)
    ledger.take_todo(1, actor="builder", db=db)
    ledger.take_todo(1, actor="reviewer", force=True, db=db)
    takeover = render.listing(ledger.history("todo", 1, db=db))[-1]
    assert re.search(r"previous at: \d{4}-\d\d-\d\d \d\d:\d\d UTC \(\d+ s ago\)$", takeover), (
        takeover
    )
