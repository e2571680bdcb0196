"""The pure mapping of a batch answer to each row's outcome (issue 19, item 3), the size
refusals that make a batch smaller, and the refused connection's short fixed retry (item 8).

The door answers a batch item by item, in body order (chief.door.router): accepted items are
notify answers, the first refused one carries its own status and detail, the items behind it
are held. Whatever the answer's shape, the outcomes are a run of deliveries and at most one
deferral, that deferral is the row at its position (never the head for another's fault), and
no row is blamed with a place in a batch."""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notifier.outcome import (
    UNREACHABLE_RETRY_S,
    BackoffPolicy,
    Deferred,
    Delivered,
    DoorReply,
    answers_row,
    backoff_s,
    classify,
    classify_batch,
    smaller_batch,
)
from plumbing.statuses import status_phrase

POLICY = BackoffPolicy(base_s=1.0, max_s=300.0)
NOW = 1_800_000_000.0
LIMIT_WORDS = "a batch carries at most {} rows (CHIEF_NOTIFY_BATCH_MAX), this one {}"


@dataclass(frozen=True)
class Row:
    id: int
    attempts: int = 0

    @property
    def delivery_key(self) -> str:
        """A key of the real shape (engine.store.queue), never the id's text."""
        return f"d-{self.id:032x}"


def _rows(count: int, first: int = 40, attempts: int = 0) -> list[Row]:
    return [Row(first + n, attempts) for n in range(count)]


def _accepted(row: Row) -> dict[str, Any]:
    return {
        "delivered": True,
        "channel": "telegram",
        "outbox_id": row.delivery_key,
        "chief_message_id": row.id,
        "telegram": "queued",
    }


def _refused(row: Row | None, loc: str = "kind") -> dict[str, Any]:
    detail = [{"type": "string_too_long", "loc": [loc], "msg": "String should have at most 100"}]
    outbox_id = None if row is None else row.delivery_key
    return {"delivered": False, "outbox_id": outbox_id, "refused": 422, "detail": detail}


def _held(row: Row) -> dict[str, Any]:
    return {"delivered": False, "outbox_id": row.delivery_key, "held": True}


def _reply(items: list[Any], status: int = 200) -> DoorReply:
    return DoorReply(status=status, body=json.dumps({"items": items}).encode())


def _batch(reply: DoorReply, rows: list[Row], rand: float = 0.0) -> list[Delivered | Deferred]:
    return classify_batch(reply, rows, policy=POLICY, now_epoch=NOW, rand=rand)


def test_the_rows_the_door_accepted_are_delivered_and_its_refusal_defers_that_row_alone() -> None:
    rows = _rows(6, attempts=2)
    items = [_accepted(r) for r in rows[:2]] + [_refused(rows[2])] + [_held(r) for r in rows[3:]]
    outcomes = _batch(_reply(items), rows)
    assert [type(o) for o in outcomes] == [Delivered, Delivered, Deferred]
    refusal = outcomes[2]
    assert isinstance(refusal, Deferred)
    assert refusal.error == "refused by the door (422): kind: String should have at most 100"
    assert refusal.retry_in_s == backoff_s(3, POLICY, 0.0)  # the row's own third attempt
    assert refusal.answer is not None
    assert json.loads(refusal.answer)["refused"] == 422
    assert refusal.refused  # counted as `refused_row`, not as the batch's 200
    assert not refusal.unreachable


def test_a_refusal_that_echoes_no_id_is_still_its_positions_row() -> None:
    rows = _rows(3)
    outcomes = _batch(_reply([_accepted(rows[0]), _refused(None), _held(rows[2])]), rows)
    assert [type(o) for o in outcomes] == [Delivered, Deferred]
    assert "refused by the door (422)" in outcomes[1].error  # type: ignore[union-attr]


def test_an_item_about_another_row_is_not_taken_for_this_one() -> None:
    rows = _rows(3)
    swapped = [_accepted(rows[1]), _accepted(rows[0]), _accepted(rows[2])]
    [outcome] = _batch(_reply(swapped), rows)
    assert isinstance(outcome, Deferred)
    assert "about another" in outcome.error


def test_answers_row_compares_the_key_the_client_sent() -> None:
    row = Row(41)
    assert answers_row(_accepted(row), row)
    assert not answers_row(_accepted(Row(42)), row)
    assert not answers_row(_accepted(row) | {"outbox_id": None}, row)  # a delivery must echo
    assert answers_row(_refused(None), row)  # a refusal may not


def test_a_batch_refused_whole_defers_the_head_alone() -> None:
    rows = _rows(3)
    reply = DoorReply(status=503, body=b'{"detail":"chief_unavailable"}')
    [outcome] = _batch(reply, rows)
    assert isinstance(outcome, Deferred)
    assert outcome.error == "HTTP 503: chief_unavailable"


def test_a_single_route_validation_refusal_reads_field_colon_message() -> None:
    detail = [{"type": "value_error", "loc": ["body", "text"], "msg": "must contain something"}]
    reply = DoorReply(status=422, body=json.dumps({"detail": detail}).encode())
    outcome = classify(reply, attempt=1, policy=POLICY, now_epoch=NOW, rand=0.0)
    assert isinstance(outcome, Deferred)
    assert outcome.error == "HTTP 422: body.text: must contain something"


# ---- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "rows", "expected"),
    [
        (DoorReply(status=413, body=b'{"detail":"body_too_large"}'), 64, 32),
        (DoorReply(status=413, body=b'{"detail":"body_too_large"}'), 3, 1),
        (DoorReply(status=413, body=b'{"detail":"body_too_large"}'), 1, None),  # a row's own
        (DoorReply(status=422, body=json.dumps(LIMIT_WORDS.format(8, 64)).encode()), 64, 8),
        (DoorReply(status=422, body=json.dumps(LIMIT_WORDS.format(8, 5)).encode()), 5, None),
        (DoorReply(status=422, body=b'{"detail":[{"msg":"Field required"}]}'), 64, None),
        (DoorReply(status=503, body=b'{"detail":"chief_unavailable"}'), 64, None),
        (DoorReply(error="timeout"), 64, None),
        (_reply([]), 64, None),
    ],
)
def test_only_a_refusal_for_its_size_makes_a_batch_smaller(
    reply: DoorReply, rows: int, expected: int | None
) -> None:
    assert smaller_batch(reply, rows) == expected


@given(status=st.integers(100, 599), rows=st.integers(1, 256), body=st.binary(max_size=200))
def test_a_smaller_batch_is_always_smaller_and_never_empty(
    status: int, rows: int, body: bytes
) -> None:
    smaller = smaller_batch(DoorReply(status=status, body=body), rows)
    assert smaller is None or 1 <= smaller < rows


# ---- a refused connection -----------------------------------------------------------------


@given(attempt=st.integers(1, 10_000), rand=st.floats(0.0, 1.0, exclude_max=True))
def test_a_refused_connection_is_tried_again_soon_however_many_tries_before(
    attempt: int, rand: float
) -> None:
    reply = DoorReply(error="nothing listens (connection refused)", refused_connection=True)
    outcome = classify(reply, attempt=attempt, policy=POLICY, now_epoch=NOW, rand=rand)
    assert outcome == Deferred(
        error="nothing listens (connection refused)",
        retry_in_s=UNREACHABLE_RETRY_S,
        unreachable=True,
    )


def test_a_refused_connection_never_waits_longer_than_the_backoff_cap() -> None:
    reply = DoorReply(error="refused", refused_connection=True)
    short = BackoffPolicy(base_s=0.05, max_s=0.2)
    outcome = classify(reply, attempt=1, policy=short, now_epoch=NOW, rand=0.0)
    assert isinstance(outcome, Deferred)
    assert outcome.retry_in_s == 0.2


def test_a_timeout_and_other_errors_keep_the_backoff() -> None:
    for reply in (DoorReply(error="timeout after 15s"), DoorReply(error="cannot connect")):
        outcome = classify(reply, attempt=9, policy=POLICY, now_epoch=NOW, rand=0.0)
        assert isinstance(outcome, Deferred)
        assert (outcome.retry_in_s, outcome.unreachable) == (backoff_s(9, POLICY, 0.0), False)


# ---- the property over answer shapes ------------------------------------------------------

JSON_LEAVES = st.none() | st.booleans() | st.integers(-5, 500) | st.text(max_size=8)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@st.composite
def answer_items(draw: st.DrawFn, rows: list[Row]) -> list[Any]:
    """What a door (this one, an older one, a broken one) could say about `rows`: per row an
    acceptance, a refusal, a held item, an item about another row, or any JSON at all; items
    missing or extra."""
    items: list[Any] = []
    for row in rows:
        kind = draw(st.sampled_from(["accepted", "refused", "held", "other_row", "junk"]))
        if kind == "accepted":
            items.append(_accepted(row))
        elif kind == "refused":
            items.append(_refused(draw(st.sampled_from([row, None]))))
        elif kind == "held":
            items.append(_held(row))
        elif kind == "other_row":
            items.append(_accepted(Row(row.id + 1000)))
        else:
            items.append(draw(JSON))
    cut = draw(st.integers(0, len(items) + 2))
    return items[:cut] + [draw(JSON) for _ in range(max(cut - len(items), 0))]


@given(data=st.data(), count=st.integers(1, 8), status=st.sampled_from([200, 201, 413, 422, 503]))
def test_any_answer_is_a_run_of_deliveries_then_at_most_one_deferral_for_the_row_it_names(
    data: st.DataObject, count: int, status: int
) -> None:
    rows = _rows(count, attempts=data.draw(st.integers(0, 20)))
    items = data.draw(answer_items(rows))
    document = data.draw(st.sampled_from([{"items": items}, items, {"items": None}]))
    reply = DoorReply(status=status, body=json.dumps(document).encode())
    outcomes = _batch(reply, rows, rand=data.draw(st.floats(0.0, 1.0, exclude_max=True)))
    assert 1 <= len(outcomes) <= len(rows)
    *run, last = outcomes
    assert all(isinstance(o, Delivered) for o in run)
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, Delivered):
            # Delivered only on an acceptance at its own position, naming its own row.
            item = items[index]
            assert isinstance(document, dict)
            assert document["items"] is items
            assert item["delivered"] is True
            assert item["outbox_id"] == rows[index].delivery_key
            assert 200 <= status < 300
    if isinstance(last, Deferred):
        index = len(outcomes) - 1
        assert last.retry_in_s >= backoff_s(rows[index].attempts + 1, POLICY, 0.0)
        assert "\n" not in last.error
        assert len(last.error) <= 300
        assert not last.unreachable
        item = items[index] if index < len(items) else None
        answered = isinstance(document, dict) and document["items"] is items
        if 200 <= status < 300 and answered and item in (_refused(rows[index]), _refused(None)):
            # The row's own refusal, in the door's words: never a place in a batch.
            assert last.error == "refused by the door (422): kind: String should have at most 100"


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422, 429, 500, 502, 503, 504])
def test_a_refusal_names_its_http_status_in_words(status: int) -> None:
    """Issue 34: an outbox row's last error says the door's status in words, as the client's
    seam reads it (`plumbing.statuses`; the pure outcome imports no `http`)."""
    reply = DoorReply(status=status, body=b"", phrase=status_phrase(status))
    outcome = classify(reply, attempt=1, policy=POLICY, now_epoch=NOW, rand=0.0)
    assert isinstance(outcome, Deferred)
    assert outcome.error == f"HTTP {status} {HTTPStatus(status).phrase}"


def test_a_status_http_does_not_name_is_its_number() -> None:
    reply = DoorReply(status=599, body=b"", phrase=status_phrase(599))
    outcome = classify(reply, attempt=1, policy=POLICY, now_epoch=NOW, rand=0.0)
    assert isinstance(outcome, Deferred)
    assert outcome.error == "HTTP 599"
