"""The owner's answer from the phone (`engine.verbs.phone.answer_request`) on real SQLite files:
every outcome, exactly once per answer key, and two keys racing on one request from two
threads, each on its own connection, released together by a barrier."""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from engine import store
from engine.errors import UsageError
from engine.verbs import VERBS, Unit
from engine.verbs import phone as phone_verbs
from tests.support.ledger import SETTINGS, ledger

RACE_ROUNDS = 20
RACE_TIMEOUT_S = 30.0


def answer(
    db: str, request_id: int, key: str | None = None, *, ask_key: str | None = None, **given: str
) -> dict[str, Any]:
    """One answer in one transaction of its own, as the owner service's route runs it; it
    names the request's own ask key unless `ask_key` is given."""
    path = Path(db)
    asked = ask_key or ask_key_of(db, request_id)
    with store.unit_of_work(path, writing=True) as tx:
        unit = Unit(tx=tx, config=lambda: SETTINGS._replace(db_path=path))
        return phone_verbs.answer_request(
            unit, request_id, answer_key=key or new_key(), ask_key=asked, **given
        )


def ask_key_of(db: str, request_id: int) -> str:
    """The request's ask key (a key no request has, for one never asked or not there)."""
    found = table(db, "SELECT ask_key FROM requests WHERE id = ?", request_id)
    return str(found[0][0]) if found and found[0][0] else "q-" + "0" * 32


def new_key() -> str:
    return "a-" + secrets.token_hex(16)


def ask(db: str, choices: str | None = "approve,decline", to: str = "owner") -> int:
    return int(
        ledger.add_request(
            "order the bigger bag?", actor="agent", addressed_to=to, choices=choices, db=db
        )["request"]["id"]
    )


def table(db: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return [tuple(row) for row in conn.execute(sql, params)]


def events(db: str, request_id: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    rows = table(
        db,
        "SELECT event, actor, payload FROM coop_events WHERE item_kind = 'request'"
        " AND item_id = ? ORDER BY id",
        request_id,
    )
    return [(e, a, None if p is None else json.loads(p)) for e, a, p in rows]


def test_a_tap_closes_the_request_by_the_owner_with_the_choice(db: str) -> None:
    request_id = ask(db)
    key = new_key()
    found = answer(db, request_id, key, choice="Decline")
    assert found["outcome"] == "closed"
    assert found["detail"] == f"request #{request_id} closed: decline"
    row = found["request"]
    assert (row["status"], row["closed_by"], row["result_summary"]) == (
        "closed",
        "owner",
        "decline",
    )
    assert events(db, request_id)[-1] == (
        "close",
        "owner",
        {"via": "telegram", "answer_key": key, "choice": "decline", "fast_path": True},
    )
    last_row = table(db, "SELECT kind, extra FROM coop_outbox ORDER BY id DESC LIMIT 1")[0]
    assert (last_row[0], json.loads(last_row[1])) == (
        "request_closed",
        {"settles": {"request_id": request_id, "key": ask_key_of(db, request_id)}, "ring": False},
    )
    assert found["outbox_id"] is not None


def test_a_text_reply_closes_a_request_without_choices(db: str) -> None:
    request_id = ask(db, choices=None)
    found = answer(db, request_id, text="yes, the 12 kg one")
    assert (found["outcome"], found["request"]["result_summary"]) == (
        "closed",
        "yes, the 12 kg one",
    )
    assert events(db, request_id)[-1][2] == {
        "via": "telegram",
        "answer_key": found_key(db),
        "text": "yes, the 12 kg one",
        "fast_path": True,
    }


def found_key(db: str) -> str:
    return str(table(db, "SELECT answer_key FROM coop_answers ORDER BY rowid DESC LIMIT 1")[0][0])


def test_a_text_reply_to_a_request_with_choices_is_kept_as_a_note(db: str) -> None:
    request_id = ask(db)
    before = table(db, "SELECT COUNT(*) FROM coop_outbox")
    found = answer(db, request_id, text="which shop?")
    assert found["outcome"] == "noted"
    assert found["request"]["status"] == "open"
    assert events(db, request_id)[-1] == (
        "note",
        "owner",
        {"via": "telegram", "text": "which shop?"},
    )
    assert table(db, "SELECT COUNT(*) FROM coop_outbox") == before


def test_a_choice_the_request_does_not_offer_changes_nothing(db: str) -> None:
    request_id = ask(db)
    found = answer(db, request_id, choice="maybe")
    assert found["outcome"] == "not_a_choice"
    assert found["detail"] == (
        f"'maybe' is not a choice of request #{request_id} (its choices: approve / decline)"
    )
    assert found["request"]["status"] == "open"
    assert [e for e, _, _ in events(db, request_id)] == ["add"]


def test_an_unknown_request_changes_nothing(db: str) -> None:
    ask(db)
    found = answer(db, 99, choice="approve")
    assert (found["outcome"], found["request"]) == ("unknown_request", None)
    assert found["detail"] == "request #99 does not exist"


def test_a_request_closed_at_a_terminal_says_who_closed_it_and_how(db: str) -> None:
    request_id = ask(db)
    ledger.take_request(request_id, actor="agent", db=db)
    ledger.close_request(request_id, actor="agent", result_summary="ordered", db=db)
    before = table(db, "SELECT COUNT(*) FROM coop_events")
    found = answer(db, request_id, choice="decline")
    assert found["outcome"] == "already_closed"
    assert found["detail"] == (
        f"request #{request_id} was already closed by agent at a terminal: ordered"
    )
    assert found["request"]["result_summary"] == "ordered"  # the first close is the record
    assert table(db, "SELECT COUNT(*) FROM coop_events") == before


def test_a_request_taken_by_an_agent_is_closed_over_them(db: str) -> None:
    request_id = ask(db)
    ledger.take_request(request_id, actor="agent", db=db)
    found = answer(db, request_id, choice="approve")
    assert found["outcome"] == "closed"
    assert events(db, request_id)[-1][2]["forced_from"] == "agent"  # type: ignore[index]


@pytest.mark.parametrize("given", [{"choice": "approve"}, {"text": "fine"}, {"choice": "nope"}])
def test_a_retried_key_answers_its_first_outcome_and_changes_nothing(
    db: str, given: dict[str, str]
) -> None:
    request_id = ask(db, choices=None if "text" in given else "approve,decline")
    key = new_key()
    first = answer(db, request_id, key, **given)
    counts = table(
        db, "SELECT (SELECT COUNT(*) FROM coop_events), (SELECT COUNT(*) FROM coop_outbox)"
    )
    again = [answer(db, request_id, key, **given) for _ in range(3)]
    assert {(a["outcome"], a["detail"]) for a in again} == {(first["outcome"], first["detail"])}
    assert all(a["replayed"] for a in again)
    assert not first["replayed"]
    assert (
        table(db, "SELECT (SELECT COUNT(*) FROM coop_events), (SELECT COUNT(*) FROM coop_outbox)")
        == counts
    )
    assert table(db, "SELECT COUNT(*) FROM coop_answers") == [(1,)]


def test_an_answer_is_a_choice_or_a_text_not_both(db: str) -> None:
    request_id = ask(db)
    with pytest.raises(UsageError, match="exactly one"):
        answer(db, request_id, choice="approve", text="both")
    with pytest.raises(UsageError, match="empty"):
        answer(db, ask(db, choices=None), text="   ")
    assert table(db, "SELECT COUNT(*) FROM coop_answers") == [(0,)]


def test_the_answer_is_no_verb_a_routed_call_could_reach() -> None:
    assert "answer_request" not in VERBS
    assert "phone_summary" not in VERBS


def _race(db: str, request_id: int) -> list[dict[str, Any]]:
    """Two answers with two keys, each thread on its own connection, let go at one instant."""
    barrier = threading.Barrier(2, timeout=RACE_TIMEOUT_S)
    found: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def one(choice: str) -> None:
        try:
            barrier.wait()
            found.append(answer(db, request_id, choice=choice))
        except BaseException as exc:  # reported below, never lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(c,)) for c in ("approve", "decline")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(RACE_TIMEOUT_S)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)
    return found


def test_two_keys_racing_on_one_request_close_it_once(db: str) -> None:
    for _ in range(RACE_ROUNDS):
        request_id = ask(db)
        found = _race(db, request_id)
        assert sorted(a["outcome"] for a in found) == ["already_closed", "closed"]
        (winner,) = [a for a in found if a["outcome"] == "closed"]
        (loser,) = [a for a in found if a["outcome"] == "already_closed"]
        result = winner["request"]["result_summary"]
        assert loser["detail"] == (
            f"request #{request_id} was already closed by owner from Telegram: {result}"
        )
        assert [e for e, _, _ in events(db, request_id)] == ["add", "close"]
