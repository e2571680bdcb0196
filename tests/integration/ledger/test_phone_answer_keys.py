"""An answer from the phone names its question by the ask key the request was filed with, and
the ledger applies it only to the request bearing that key (`engine.verbs.phone`): request ids
come back (a fresh coop.db, a restore from a backup taken before the request was filed, a
second ledger behind the same door), ask keys never do. On real SQLite files:

- each way an id is reused: the old ask's answer is `not_this_request` (or `unknown_request`
  while the id is not handed out again), says so in plain words, and changes nothing;
- a property over any sequence of requests filed and closed on two ledgers, backups taken and
  restored, and answers naming any ask key (either ledger's, or none ever drawn), retried or
  not: an answer closes a request only when its key is that request's, exactly once."""

from __future__ import annotations

import json
import secrets
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import store
from engine.verbs import Unit
from engine.verbs import phone as phone_verbs
from tests.support.ledger import SETTINGS, ledger

pytestmark = pytest.mark.timeout(120)

NEVER_DRAWN = "q-" + "0" * 32


def answer(db: Path, request_id: int, ask_key: str, answer_key: str, **given: str) -> Any:
    with store.unit_of_work(db, writing=True) as tx:
        unit = Unit(tx=tx, config=lambda: SETTINGS._replace(db_path=db))
        return phone_verbs.answer_request(
            unit, request_id, answer_key=answer_key, ask_key=ask_key, **given
        )


def new_answer_key() -> str:
    return "a-" + secrets.token_hex(16)


def file(db: Path, title: str, choices: str | None = "approve,decline") -> tuple[int, str]:
    found = ledger.add_request(
        title, actor="agent", addressed_to="owner", choices=choices, db=str(db)
    )["request"]
    return int(found["id"]), ask_key(db, int(found["id"]))


def ask_key(db: Path, request_id: int) -> str:
    with closing(sqlite3.connect(db)) as conn:
        (key,) = conn.execute("SELECT ask_key FROM requests WHERE id = ?", (request_id,)).fetchone()
    return str(key)


def state(db: Path) -> list[tuple[Any, ...]]:
    """Everything an answer could change: the requests and their events."""
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT id, status, closed_by, result_summary FROM requests")
        events = conn.execute("SELECT item_id, event, payload FROM coop_events ORDER BY id")
        return [*map(tuple, rows), *map(tuple, events)]


def backup(source: Path, target: Path) -> None:
    """The README's backup and restore: SQLite's backup API, the target replaced whole."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def test_a_key_drawn_for_each_request_filed_to_the_owner_and_only_those(db: str) -> None:
    path = Path(db)
    keys = {file(path, f"question {n}")[1] for n in range(20)}
    assert len(keys) == 20
    assert all(key.startswith("q-") and len(key) == 34 for key in keys)
    other = ledger.add_request("review it", actor="agent", addressed_to="reviewer", db=db)
    with closing(sqlite3.connect(db)) as conn:
        (key,) = conn.execute(
            "SELECT ask_key FROM requests WHERE id = ?", (other["request"]["id"],)
        ).fetchone()
    assert key is None


@pytest.mark.parametrize("way", ["fresh_db", "restore", "second_ledger"])
def test_an_old_asks_answer_never_touches_the_new_request_of_its_id(
    tmp_path: Path, way: str
) -> None:
    db = tmp_path / "coop.db"
    ledger.add_todo("something in the ledger", actor="agent", db=str(db))
    saved = tmp_path / "backup.db"
    backup(db, saved)
    old_id, old_key = file(db, "the old question?")
    if way == "restore":
        backup(saved, db)
    elif way == "fresh_db":
        db.unlink()
    else:
        db = tmp_path / "second.db"
    gone = answer(db, old_id, old_key, new_answer_key(), choice="approve")
    assert gone["outcome"] == "unknown_request"  # no request #N yet: nothing to answer
    new_id, new_key = file(db, "the new question?", choices=None)
    assert (new_id, new_key != old_key) == (old_id, True)
    before = state(db)
    for said in ({"choice": "approve"}, {"text": "yes please"}):
        found = answer(db, old_id, old_key, new_answer_key(), **said)
        assert found["outcome"] == "not_this_request"
        assert found["detail"] == (
            f"This question is no longer in the ledger (request #{old_id} is another request"
            " now); nothing was changed."
        )
        assert found["outbox_id"] is None
        assert state(db) == before
    closed = answer(db, new_id, new_key, new_answer_key(), text="the blue one")
    assert closed["outcome"] == "closed"
    assert closed["request"]["result_summary"] == "the blue one"
    with closing(sqlite3.connect(db)) as conn:
        (extra,) = conn.execute("SELECT extra FROM coop_outbox ORDER BY id DESC LIMIT 1").fetchone()
    assert json.loads(extra) == {"settles": {"request_id": new_id, "key": new_key}, "ring": False}


def test_a_retried_answer_key_keeps_its_first_outcome_whatever_ask_key_it_names_later(
    db: str,
) -> None:
    path = Path(db)
    request_id, key = file(path, "order?")
    answer_key = new_answer_key()
    first = answer(path, request_id, NEVER_DRAWN, answer_key, choice="approve")
    assert first["outcome"] == "not_this_request"
    again = answer(path, request_id, key, answer_key, choice="approve")
    assert (again["outcome"], again["replayed"]) == ("not_this_request", True)
    assert ledger.show_request(request_id, db=db)["request"]["status"] == "open"


# ---- the property ----------------------------------------------------------------------------

LEDGERS = ("a", "b")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("file"), st.sampled_from(LEDGERS), st.booleans()),
        st.tuples(st.just("close"), st.sampled_from(LEDGERS), st.integers(1, 6)),
        st.tuples(st.just("backup"), st.sampled_from(LEDGERS)),
        st.tuples(st.just("restore"), st.sampled_from(LEDGERS)),
        st.tuples(
            st.just("answer"),
            st.sampled_from(LEDGERS),
            st.integers(1, 6),  # the request id
            st.integers(0, 8),  # which key: one drawn so far (either ledger), or none ever drawn
            st.booleans(),  # a retry of an earlier answer key
        ),
    ),
    max_size=25,
)


class Household:
    """Two ledgers behind one door, each a real coop.db, and every ask key either has drawn."""

    def __init__(self, folder: Path, seen: dict[str, int]) -> None:
        self.folder = folder
        self.seen = seen
        self.dbs = {name: folder / f"{name}.db" for name in LEDGERS}
        self.keys: list[str] = []
        self.answer_keys: list[str] = []

    def run(self, op: tuple[Any, ...]) -> None:
        kind, name = op[0], op[1]
        db = self.dbs[name]
        if kind == "file":
            self.keys.append(file(db, "a question?", "approve,decline" if op[2] else None)[1])
        elif kind == "close":
            self._close(db, op[2])
        elif kind == "backup" and db.exists():
            backup(db, self.folder / f"{name}.backup")
        elif kind == "restore" and (self.folder / f"{name}.backup").exists():
            backup(self.folder / f"{name}.backup", db)
        elif kind == "answer":
            self._answer(db, *op[2:])

    def _close(self, db: Path, request_id: int) -> None:
        if db.exists() and self._row(db, request_id)[1] == "open":
            ledger.close_request(request_id, actor="owner", result_summary="done", db=str(db))

    def _row(self, db: Path, request_id: int) -> tuple[Any, ...]:
        if not db.exists():
            return (None, None, None)
        with closing(sqlite3.connect(db)) as conn:
            found = conn.execute(
                "SELECT ask_key, status, result_summary FROM requests WHERE id = ?",
                (request_id,),
            ).fetchone()
        return (None, None, None) if found is None else tuple(found)

    def _answer(self, db: Path, request_id: int, which: int, retry: bool) -> None:
        key = self.keys[which] if which < len(self.keys) else NEVER_DRAWN
        answer_key = self.answer_keys[-1] if retry and self.answer_keys else new_answer_key()
        self.answer_keys.append(answer_key)
        row_key, status, _ = self._row(db, request_id)
        before = state(db) if db.exists() else []
        closes = [e for e in before if len(e) == 3 and e[1] == "close"]
        found = answer(db, request_id, key, answer_key, text="fine")
        self.seen[found["outcome"]] = self.seen.get(found["outcome"], 0) + 1
        after = state(db)
        if found["outcome"] == "closed" and not found["replayed"]:
            # The one way a request closes: its own key, while it was open.
            assert (key, status) == (row_key, "open"), (key, row_key, status)
            assert [e for e in after if len(e) == 3 and e[1] == "close"][: len(closes)] == closes
        else:
            assert [e for e in after if len(e) == 3 and e[1] == "close"] == closes
        if (key, status, found["replayed"]) == (row_key, "open", False):
            assert found["outcome"] in ("closed", "noted")  # its own key: it is answered
        if key != row_key:
            assert found["outcome"] in ("not_this_request", "unknown_request") or found["replayed"]
            assert after == before


def test_an_answer_closes_a_request_only_when_its_key_is_that_requests() -> None:
    seen: dict[str, int] = {}

    @given(ops=OPS)
    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    def run(ops: list[tuple[Any, ...]]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            household = Household(Path(folder), seen)
            for op in ops:
                household.run(op)

    run()
    # The sequences reached every case: own keys closing, old and foreign keys refused.
    assert {"closed", "not_this_request", "unknown_request"} <= set(seen), seen
