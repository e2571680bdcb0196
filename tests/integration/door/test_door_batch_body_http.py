"""The notify-batch body is exactly {items: [...]} with 1 to CHIEF_NOTIFY_BATCH_MAX rows: any
other envelope is 422 for the whole batch and records nothing. Each item is then judged on its
own, as strict as the single route's body with its outbox_id required and no outbox_id twice:
the items before the first refused one are accepted, the refused one is answered with its own
422 detail, the items behind it are held, and neither is recorded (real HTTP, a valid key, after
the guard passed); a property test mutates valid batches into ones with one bad item (a
malformed notify extra among the defects)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from chief.door.config import DEFAULT_NOTIFY_BATCH_MAX
from plumbing.wire import NOTIFY_BATCH_PATH
from tests.integration.door.conftest import LiveDoor

pytestmark = pytest.mark.timeout(120)

ROW = {"text": "todo #3 done", "kind": "todo.done", "outbox_id": "3"}
BAD_VALUES: list[object] = [None, 3, 1.5, True, [], ["a"], {}, ""]
ASK = {"request_id": 7, "title": "order?", "choices": ["approve", "decline"]}
BAD_EXTRAS: list[dict[str, object]] = [
    {"ask": None},
    {"ask": ASK | {"request_id": 0}},
    {"ask": ASK | {"choices": ["a", "A"]}},
    {"ask": ASK | {"choices": ["a,b"]}},
    {"ask": ASK | {"choices": ["x" * 25]}},
    {"ask": ASK | {"choices": ["a", "b", "c", "d", "e"]}},
    {"ask": ASK | {"choices": ["bell\a"]}},
    {"ask": ASK | {"what": 1}},
    {"settles": 0},
    {"settles": "7"},
    {"ring": "no"},
    {"ring": None},
]


def rows(count: int, prefix: str = "r") -> list[dict[str, str]]:
    return [ROW | {"outbox_id": f"{prefix}-{n}", "text": f"row {prefix}-{n}"} for n in range(count)]


def recorded(door: LiveDoor) -> tuple[int, int, int]:
    """What a refused batch must not change: Chief messages, queued reports, and every
    Telegram entry ever queued (the queue's AUTOINCREMENT high mark: the sender may drain the
    queue meanwhile, but never lowers this)."""
    high = "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'telegram_queue'"
    return (
        door._scalar("SELECT COUNT(*) FROM messages"),
        door._scalar("SELECT COUNT(*) FROM chief_report_outbox"),
        door._scalar(high),
    )


def assert_refused(door: LiveDoor, document: object) -> dict[str, Any]:
    before = recorded(door)
    with capture_logs() as logs:
        response = door.notify_batch(document)
    assert response.status_code == 422, (response.status_code, response.text, document)
    assert isinstance(response.json()["detail"], list)
    assert [e["reason"] for e in logs if e["event"] == "door.refused"] == ["invalid_body"]
    assert recorded(door) == before
    return response.json()  # type: ignore[no-any-return]


def assert_item_refused(door: LiveDoor, document: dict[str, Any], index: int) -> dict[str, Any]:
    """`document`'s items before `index` accepted, the item at `index` refused on its own with
    422 and its validation detail, the items behind it held; nothing recorded past `index`."""
    items = document["items"]
    ahead = [item["outbox_id"] for item in items[:index]]
    before = recorded(door)
    with capture_logs() as logs:
        response = door.notify_batch(document)
    assert response.status_code == 200, (response.status_code, response.text, document)
    answers = response.json()["items"]
    assert len(answers) == len(items)
    assert [answer["outbox_id"] for answer in answers[:index]] == ahead
    assert all(answer["delivered"] is True for answer in answers[:index])
    refused = answers[index]
    assert (refused["delivered"], refused["refused"]) == (False, 422), refused
    assert refused["detail"]
    assert all("items" not in error["loc"] for error in refused["detail"])
    for answer in answers[index + 1 :]:
        assert answer == {"delivered": False, "outbox_id": answer["outbox_id"], "held": True}
    events = [e for e in logs if e["event"] == "door.refused"]
    assert [(e["reason"], e["accepted"], e["held"]) for e in events] == [
        ("invalid_item", index, len(items) - index - 1)
    ]
    messages, reports, entries = recorded(door)
    # Only the rows ahead were recorded: a Chief line each (landed or queued), one Telegram entry.
    assert (reports, entries) == (before[1] + index, before[2] + index)
    assert messages <= before[0] + index
    return refused


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"items": []},
        {"items": None},
        {"items": ROW},
        {"items": "rows"},
        {"items": rows(1), "extra": 1},
        {"rows": rows(1)},
        [ROW],
        None,
    ],
    ids=lambda document: json.dumps(document)[:60],
)
def test_door_batch_refuses_a_bad_envelope_whole_with_422(live: LiveDoor, document: object) -> None:
    assert_refused(live, document)


@pytest.mark.parametrize(
    ("bad", "loc"),
    [
        (
            ROW | {"outbox_id": None},
            ["outbox_id"],
        ),  # the batch needs the id the single route may omit
        ({"text": "t", "kind": "k"}, ["outbox_id"]),
        (ROW | {"extra": "field"}, ["extra"]),
        (ROW | {"outbox_id": 3}, ["outbox_id"]),
        (ROW | {"outbox_id": "has space"}, ["outbox_id"]),
        (ROW | {"text": "x" * 4001}, ["text"]),
        (ROW | {"text": "  \n"}, ["text"]),
        (ROW | {"kind": ""}, ["kind"]),
        (ROW | {"kind": "k" * 101}, ["kind"]),
        (ROW | {"outbox_id": "r-0"}, ["outbox_id"]),  # an id twice: the second is refused
        ("row", []),
    ],
    ids=lambda bad: json.dumps(bad)[:60],
)
def test_door_batch_refuses_a_bad_item_alone_and_holds_the_items_behind_it(
    live: LiveDoor, bad: object, loc: list[object]
) -> None:
    tag = uuid.uuid4().hex[:8]
    items: list[Any] = rows(2, tag)
    if isinstance(bad, dict) and bad.get("outbox_id") == "r-0":
        bad = bad | {"outbox_id": items[0]["outbox_id"]}
    document = {"items": [*items, bad, *rows(2, tag + "-behind")]}
    refused = assert_item_refused(live, document, 2)
    assert refused["detail"][0]["loc"] == loc, refused
    for item in document["items"][3:]:
        assert live.chief_lines(item["outbox_id"]) == 0


def test_door_batch_refusing_its_first_item_records_nothing(live: LiveDoor) -> None:
    tag = uuid.uuid4().hex[:8]
    document = {"items": [ROW | {"outbox_id": f"{tag}-bad", "text": " "}, *rows(3, tag)]}
    refused = assert_item_refused(live, document, 0)
    assert refused["outbox_id"] == f"{tag}-bad"


def test_door_batch_past_its_row_limit_is_422_naming_the_setting(live: LiveDoor) -> None:
    answer = assert_refused(live, {"items": rows(DEFAULT_NOTIFY_BATCH_MAX + 1, "over")})
    [error] = answer["detail"]
    assert "CHIEF_NOTIFY_BATCH_MAX" in error["msg"]
    assert f"at most {DEFAULT_NOTIFY_BATCH_MAX} rows" in error["msg"]
    assert error["loc"] == ["items"]


def test_door_batch_refuses_undecodable_and_oversized_bodies(live: LiveDoor) -> None:
    before = recorded(live)
    for content in (b"", b"{not json", b'{"items": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"):
        response = live.post_raw(content, path=NOTIFY_BATCH_PATH)
        assert response.status_code == 422, content[:40]
    # A lone surrogate is text no database can store: that item alone is refused.
    content = b'{"items": [{"text": "\\ud800", "kind": "k", "outbox_id": "1"}]}'
    response = live.post_raw(content, path=NOTIFY_BATCH_PATH)
    assert response.status_code == 200, response.text
    [answer] = response.json()["items"]
    assert (answer["refused"], answer["detail"][0]["loc"]) == (422, ["text"])
    huge = b'{"items": [' + b" " * (DEFAULT_NOTIFY_BATCH_MAX * 64 * 1024) + b"]}"
    response = live.post_raw(huge, path=NOTIFY_BATCH_PATH)
    assert (response.status_code, response.json()) == (413, {"detail": "body_too_large"})
    assert recorded(live) == before


def test_door_batch_at_its_row_limit_is_accepted(live: LiveDoor) -> None:
    ids = [f"limit-{n}" for n in range(DEFAULT_NOTIFY_BATCH_MAX)]
    document = {"items": [ROW | {"outbox_id": i, "text": f"row {i}"} for i in ids]}
    response = live.notify_batch(document)
    assert response.status_code == 200, response.text
    assert [answer["outbox_id"] for answer in response.json()["items"]] == ids
    assert all(live.chief_lines(i) == 1 for i in ids)


# ---- the property: any one defect in an otherwise valid batch is that item's own refusal ------

FIELDS = ("text", "kind", "outbox_id")


@st.composite
def broken_batches(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """A valid batch of 1..4 fresh rows with exactly one defect drawn from what an item may
    not be, and the index of the item that carries it."""
    tag = uuid.uuid4().hex[:8]
    items: list[Any] = rows(draw(st.integers(1, 4)), tag)
    index = draw(st.integers(0, len(items) - 1))
    defect = draw(
        st.sampled_from(
            [
                "drop",
                "extra",
                "bad_value",
                "long_text",
                "blank_text",
                "bad_id",
                "twice",
                "row",
                "bad_extra",
            ]
        )
    )
    row = dict(items[index])
    if defect == "drop":
        del row[draw(st.sampled_from(FIELDS))]
    elif defect == "extra":
        name = draw(st.text(min_size=1, max_size=8).filter(lambda n: n not in FIELDS))
        row[name] = draw(st.sampled_from(BAD_VALUES))
    elif defect == "bad_value":
        row[draw(st.sampled_from(FIELDS))] = draw(st.sampled_from(BAD_VALUES))
    elif defect == "long_text":
        row["text"] = "x" * draw(st.integers(4001, 4100))
    elif defect == "blank_text":
        row[draw(st.sampled_from(("text", "kind")))] = draw(st.sampled_from(["", " ", "\n\t "]))
    elif defect == "bad_extra":  # the notify extras (ask, settles, ring), one malformed
        row |= draw(st.sampled_from(BAD_EXTRAS))
    elif defect == "bad_id":
        row["outbox_id"] = draw(st.sampled_from(["a b", "x" * 129, "é", "a/b", "1;2"]))
    elif defect == "twice":
        # The second time an id appears is the defect: the first is a valid item.
        if index == 0:
            items.insert(1, dict(row))
            return {"items": items}, 1
        row["outbox_id"] = items[index - 1]["outbox_id"]
    else:
        row = draw(st.sampled_from(BAD_VALUES))  # a row that is not an object
    items[index] = row
    return {"items": items}, index


def test_door_batch_any_single_defect_is_that_items_refusal_and_records_nothing_behind(
    live: LiveDoor,
) -> None:
    @given(case=broken_batches())
    @settings(
        max_examples=120,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def run(case: tuple[dict[str, Any], int]) -> None:
        document, index = case
        assert_item_refused(live, document, index)

    run()
