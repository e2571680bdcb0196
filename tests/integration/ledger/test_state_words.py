"""A state is a word, never a quoted value (issue 34, item 10): every refusal of a move, over
every kind, verb and state the lifecycles know, and every refusal of an outbox row by its
state, names the state plainly (`request #1 is closed — ...`, `outbox row #1 is delivered —
...`), against a real SQLite file where a row is needed."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from engine import lifecycle
from engine.errors import LifecycleError
from engine.store import queue
from tests.support.ledger import ledger, outbox

STATES = sorted({"open", "taken", *lifecycle.TERMINAL})


def refusals() -> list[tuple[str, str, str]]:
    return [
        (kind, verb, status)
        for kind, moves in lifecycle.MOVES.items()
        for verb, (allowed, _) in moves.items()
        for status in STATES
        if status not in allowed
    ]


@pytest.mark.parametrize(("kind", "verb", "status"), refusals())
def test_every_refused_move_names_its_state_as_a_word(kind: str, verb: str, status: str) -> None:
    with pytest.raises(LifecycleError) as refused:
        lifecycle.check_move(kind, 7, verb, status)
    words = str(refused.value)
    assert words.startswith(f"{kind} #7 is {status} — "), words
    assert "'" not in words, words


def test_finishing_an_abandoned_todo_names_the_state_as_a_word(db: str) -> None:
    ledger.add_todo("t", actor="builder", db=db)
    ledger.abandon_todo(1, actor="builder", reason="blocked", db=db)
    with pytest.raises(LifecycleError) as refused:
        ledger.done_todo(1, actor="builder", db=db)
    assert str(refused.value).startswith("todo #1 is abandoned — only the owner (owner)")


@pytest.mark.parametrize("state", sorted(set(queue.STATES) - {"pending"}))
@pytest.mark.parametrize("verb", ["retry", "cancel"])
def test_an_outbox_row_refused_by_its_state_names_it_as_a_word(
    db: str, state: str, verb: str
) -> None:
    outbox.notify("one", actor="cron", db=db)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE coop_outbox SET state = ?", (state,))
    call = getattr(outbox, verb)
    with pytest.raises(LifecycleError) as refused:
        call(1, actor="owner", db=db, **({"reason": "x"} if verb == "cancel" else {}))
    words = str(refused.value)
    assert words.startswith(f"outbox row #1 is {state} — only a pending row"), words
