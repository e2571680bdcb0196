"""The owner's decision is the record (issue 34, item 1): once the owner has closed a request (or
amended its outcome), nobody else replaces it, `--force` or not; another actor's words become a
note beside it. Every amendment is one: an `edit` event naming its actor, a line that says
`amended`, an outbox row that tells the Chief (and, for an ask, edits the decided message on
the phone), and `show` puts it beside the close it amends. `unchanged` says only what is true.

A property test drives any sequence of closes (and todo dones) by the owner, the closer and a
stranger, with and without --force, after a first close at a terminal or the owner's tap on
the phone, against a real SQLite file, and checks those promises after every step.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import lifecycle, store
from engine.cli import render
from engine.errors import LifecycleError
from engine.verbs import Unit
from engine.verbs.declare import cli_of
from engine.verbs.ledger import close_request, done_todo, wait_request
from engine.verbs.phone import answer_request
from tests.support.ledger import SETTINGS, ledger


def events(db: str, item_id: int = 1) -> list[dict[str, Any]]:
    return [
        e | {"payload": json.loads(e["payload"]) if e["payload"] else None}
        for e in ledger.history("request", item_id, db=db)
    ]


def outbox(db: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(db)) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("SELECT * FROM coop_outbox ORDER BY id")]


def line(found: dict[str, Any], **arguments: Any) -> str:
    """What `coop request close` prints of `found`: the CLI's own render of the verb's answer."""
    cli = cli_of(close_request)
    assert cli is not None
    (said,) = render.answer("request", found, cli.says, arguments)
    return said


def asked(db: str) -> None:
    ledger.add_request(
        "order the bigger bag?",
        actor="agent",
        addressed_to="owner",
        choices="approve,decline",
        db=db,
    )


def test_an_agent_with_force_cannot_replace_the_owners_answer(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    rows_before = len(outbox(db))
    found = ledger.close_request(1, actor="agent", result_summary="decline", force=True, db=db)
    row = found["request"]
    assert (row["closed_by"], row["result_summary"]) == ("owner", "approve")
    assert line(found) == (
        'request #1 noted: the owner\'s decision stays the record (summary "approve");'
        f' agent\'s summary "decline" is kept as a note beside it; notification #{rows_before + 1}'
        " queued"
    )
    last = events(db)[-1]
    assert (last["event"], last["actor"], last["payload"]) == ("note", "agent", {"text": "decline"})
    note = outbox(db)[-1]
    assert note["kind"] == "request_noted"
    assert note["text"].startswith('request #1 "order the bigger bag?": agent adds a note')


def test_without_force_a_stranger_is_refused_in_the_owners_words(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    with pytest.raises(LifecycleError, match="the owner's decision is the record"):
        ledger.close_request(1, actor="agent", result_summary="decline", db=db)


def test_an_owner_amendment_of_an_agents_close_makes_it_the_owners(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="agent", result_summary="decline", force=True, db=db)
    found = ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    assert line(found).startswith(
        'request #1 amended: summary "decline" → "approve"; the first close stays the record'
    )
    again = ledger.close_request(1, actor="agent", result_summary="decline", db=db)
    assert again["request"]["result_summary"] == "approve"
    assert again.get("noted") is not None


def test_an_amendment_reads_as_one_and_tells_the_chief_and_the_phone(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="owner", result_summary="a", db=db)
    found = ledger.close_request(1, actor="owner", result_summary="b", db=db)
    assert line(found) == (
        'request #1 amended: summary "a" → "b"; the first close stays the record;'
        f" notification #{found['outbox_id']} queued"
    )
    edit = events(db)[-1]
    assert (edit["event"], edit["actor"]) == ("edit", "owner")
    assert edit["payload"]["previous"] == {"result_summary": "a"}
    assert edit["payload"]["now"] == {"result_summary": "b"}
    row = outbox(db)[-1]
    assert row["kind"] == "request_amended"
    assert row["text"] == 'request #1 "order the bigger bag?" amended by owner: summary "a" → "b"'
    ask_key = ledger.show_request(1, db=db)["request"]["ask_key"]
    assert json.loads(row["extra"]) == {"amends": {"request_id": 1, "key": ask_key}, "ring": False}
    repeat = ledger.close_request(1, actor="owner", result_summary="b", db=db)
    assert line(repeat) == (
        "request #1 unchanged: already closed by owner, and nothing given differs from it"
    )


def test_show_puts_each_amendment_and_note_beside_the_close(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="agent", result_summary="decline", force=True, db=db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    ledger.close_request(1, actor="agent", result_summary="still decline", db=db)
    shown = ledger.show_request(1, last=0, db=db)
    lines = render.answer("request", shown, None, {})
    labels = [each.split(":", 1)[0].strip() for each in lines[1:]]
    closed = labels.index("closed")
    assert labels[closed : closed + 4] == ["closed", "summary", "amended", "note"]
    amended = lines[1 + closed + 2]
    assert amended.endswith('by owner: summary "decline" → "approve"')
    assert lines[1 + closed + 3].endswith("by agent: still decline")


# ---- the class: any sequence of closes by anyone -----------------------------------------

ACTORS = ("owner", "agent", "stranger")
SUMMARIES = (None, "approve", "decline", "maybe")
COMMITS = (None, "beef", "f00d")
Step = tuple[str, str | None, str | None, bool]
STEPS = st.lists(
    st.tuples(
        st.sampled_from(ACTORS),
        st.sampled_from(SUMMARIES),
        st.sampled_from(COMMITS),
        st.booleans(),
    ),
    min_size=1,
    max_size=8,
)


#: The closing verb of each kind, and the line its command prints.
CLOSES = {"request": (close_request, "close_request"), "todo": (done_todo, "done_todo")}


def _outcome(db: str, kind: str) -> dict[str, Any]:
    row = getattr(ledger, f"show_{kind}")(1, last=0, db=db)[kind]
    return {"result_summary": row["result_summary"], "commit_sha": row["commit_sha"]}


def _history(db: str, kind: str) -> tuple[list[dict[str, Any]], int]:
    return ledger.history(kind, 1, db=db), len(outbox(db))


def _step(db: str, kind: str, step: Step, owner_decided: bool) -> bool:
    """Run one close and check its promises; whether the owner has decided after it."""
    actor, summary, commit, force = step
    verb, name = CLOSES[kind]
    before, (history, rows) = _outcome(db, kind), _history(db, kind)
    try:
        found = getattr(ledger, name)(
            1, actor=actor, result_summary=summary, commit_sha=commit, force=force, db=db
        )
    except LifecycleError:
        assert (_outcome(db, kind), _history(db, kind)) == (before, (history, rows))
        assert actor != "owner"  # the owner is never refused
        return owner_decided
    after, (now, rows_now) = _outcome(db, kind), _history(db, kind)
    new = now[len(history) :]
    cli = cli_of(verb)
    assert cli is not None
    (said,) = render.answer(kind, found, cli.says, {})
    if owner_decided and actor != "owner":
        assert after == before, "the owner's decision changed"
    if after != before:
        (edit,) = new
        assert (edit["event"], edit["actor"]) == ("edit", actor)
        changes = {n: [before[n], after[n]] for n in before if before[n] != after[n]}
        assert said == (
            f"{kind} #1 amended: {lifecycle.changes_words(changes)}; the first close stays the"
            f" record; notification #{rows_now} queued"
        )
        assert rows_now == rows + 1  # the Chief is told, in one line
        return owner_decided or actor == "owner"
    if new:
        (note,) = new
        assert (note["event"], note["actor"]) == ("note", actor)
        assert said.startswith(f"{kind} #1 noted: the owner's decision stays the record"), said
        assert rows_now == rows + 1
        return owner_decided
    assert said.startswith(f"{kind} #1 unchanged: already "), said
    assert rows_now == rows
    return owner_decided


def answered_from_the_phone(db: str, choice: str) -> None:
    """The owner's tap, as `coop serve`'s phone route applies it."""
    path = Path(db)
    ask_key = ledger.show_request(1, db=db)["request"]["ask_key"]
    with store.unit_of_work(path, writing=True) as tx:
        unit = Unit(tx=tx, config=lambda: SETTINGS._replace(db_path=path))
        found = answer_request(
            unit, 1, answer_key="a-" + secrets.token_hex(16), ask_key=ask_key, choice=choice
        )
    assert found["outcome"] == "closed", found


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(sorted(CLOSES)), first=st.sampled_from(("phone", *ACTORS)), steps=STEPS)
def test_no_sequence_of_closes_replaces_the_owners_decision(
    tmp_path: Path, kind: str, first: str, steps: list[Step]
) -> None:
    db = str(tmp_path / f"{len(list(tmp_path.iterdir()))}.db")
    if kind == "todo":
        ledger.add_todo("water the plants", actor="agent", db=db)
        first = "owner" if first == "phone" else first  # a todo is never asked on the phone
    else:
        asked(db)
    if first == "phone":
        answered_from_the_phone(db, "approve")
    else:
        getattr(ledger, CLOSES[kind][1])(1, actor=first, result_summary="first", force=True, db=db)
    owner_decided = first in ("phone", "owner")
    for step in steps:
        owner_decided = _step(db, kind, step, owner_decided)


def test_a_late_tap_is_told_who_amended_the_outcome_not_only_who_closed_it(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="agent", result_summary="decline", force=True, db=db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    path = Path(db)
    ask_key = ledger.show_request(1, db=db)["request"]["ask_key"]
    with store.unit_of_work(path, writing=True) as tx:
        unit = Unit(tx=tx, config=lambda: SETTINGS._replace(db_path=path))
        found = answer_request(unit, 1, answer_key="a-" + "1" * 32, ask_key=ask_key, choice="no")
    assert found["detail"] == (
        "request #1 was already closed by agent at a terminal: approve (amended by owner)"
    )


def test_a_wait_says_who_amended_the_outcome_beside_its_closer(db: str) -> None:
    asked(db)
    ledger.close_request(1, actor="agent", result_summary="decline", force=True, db=db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    found = ledger.wait_request(1, timeout_s=0, db=db)
    cli = cli_of(wait_request)
    assert cli is not None
    (said,) = render.answer("request", found, cli.says, {})
    assert said == "request #1 closed by agent: approve (amended by owner)"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    event=st.sampled_from(["edit", "note"]),
    payload=st.one_of(
        st.none(),
        st.text(max_size=12),
        JSONISH.map(json.dumps),
        st.fixed_dictionaries(
            {"fields": st.lists(JSONISH, max_size=3), "previous": JSONISH, "now": JSONISH}
        ).map(json.dumps),
    ),
)
def test_show_reads_any_amendment_or_note_a_ledger_holds(
    tmp_path: Path, event: str, payload: str | None
) -> None:
    """Whatever an `edit` or a `note` event holds (a ledger written by another build, by hand),
    `show` still answers and prints it in words."""
    db = str(tmp_path / f"{len(list(tmp_path.iterdir()))}.db")
    asked(db)
    ledger.close_request(1, actor="owner", result_summary="approve", db=db)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "INSERT INTO coop_events (item_kind, item_id, event, actor, at, payload)"
            " VALUES ('request', 1, ?, 'agent', '2026-01-01T00:00:00.000Z', ?)",
            (event, payload),
        )
    shown = ledger.show_request(1, db=db)
    lines = render.answer("request", shown, None, {})
    assert lines[0].startswith("request #1  [closed]")
    assert any(line.startswith(f"  {'amended' if event == 'edit' else 'note'}:") for line in lines)
