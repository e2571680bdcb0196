"""The notify extras (`ask`, `settles`, `ring`) are accepted strictly, on the single route and
on each batch item: every malformed extra is a 422 with a located detail and writes nothing, a
batch item with one is that item's own refusal (the items before it accepted, the ones behind
it held), and a property test over generated extras finds the door's verdict equal to the
rules' and never a server error (real HTTP, a valid key, after the guard passed)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from tests.integration.door.conftest import LiveDoor
from tests.integration.door.test_door_batch_body_http import assert_item_refused, rows

pytestmark = pytest.mark.timeout(120)

KEY = "q-" + "7" * 32
ASK = {
    "request_id": 7,
    "key": KEY,
    "title": "order the bigger bag?",
    "choices": ["approve", "decline"],
}
SETTLE = {"request_id": 7, "key": KEY}
ASK_KEY_RE = re.compile(r"q-[0-9a-f]{32}")


def row(outbox_id: str, **extras: object) -> dict[str, Any]:
    return {"text": f"request row {outbox_id}", "kind": "request", "outbox_id": outbox_id} | extras


MALFORMED: list[tuple[dict[str, Any], list[object]]] = [
    ({"ask": None}, ["ask"]),
    ({"ask": "approve"}, ["ask"]),
    ({"ask": ASK | {"extra": 1}}, ["ask", "extra"]),
    ({"ask": {"title": "t", "key": KEY, "choices": []}}, ["ask", "request_id"]),
    ({"ask": {k: v for k, v in ASK.items() if k != "key"}}, ["ask", "key"]),
    ({"ask": ASK | {"key": "7"}}, ["ask", "key"]),
    ({"ask": ASK | {"key": "q-" + "A" * 32}}, ["ask", "key"]),
    ({"ask": ASK | {"key": 7}}, ["ask", "key"]),
    ({"ask": ASK | {"request_id": 0}}, ["ask", "request_id"]),
    ({"ask": ASK | {"request_id": -3}}, ["ask", "request_id"]),
    ({"ask": ASK | {"request_id": "7"}}, ["ask", "request_id"]),
    ({"ask": ASK | {"request_id": True}}, ["ask", "request_id"]),
    ({"ask": ASK | {"request_id": 7.0}}, ["ask", "request_id"]),
    ({"ask": ASK | {"request_id": 2**63}}, ["ask", "request_id"]),
    ({"ask": ASK | {"title": ""}}, ["ask", "title"]),
    ({"ask": ASK | {"title": None}}, ["ask", "title"]),
    ({"ask": ASK | {"choices": "approve,decline"}}, ["ask", "choices"]),
    ({"ask": ASK | {"choices": ["a", "b", "c", "d", "e"]}}, ["ask", "choices"]),
    ({"ask": ASK | {"choices": ["yes", "YES"]}}, ["ask", "choices"]),
    ({"ask": ASK | {"choices": ["a,b"]}}, ["ask", "choices", 0]),
    ({"ask": ASK | {"choices": ["ok", ""]}}, ["ask", "choices", 1]),
    ({"ask": ASK | {"choices": ["x" * 25]}}, ["ask", "choices", 0]),
    ({"ask": ASK | {"choices": ["tab\there"]}}, ["ask", "choices", 0]),
    ({"ask": ASK | {"choices": ["line\nbreak"]}}, ["ask", "choices", 0]),
    ({"ask": ASK | {"choices": [1]}}, ["ask", "choices", 0]),
    ({"ask": ASK | {"choices": None}}, ["ask", "choices"]),
    ({"settles": None}, ["settles"]),
    ({"settles": 0}, ["settles"]),
    ({"settles": "7"}, ["settles"]),
    ({"settles": 7.5}, ["settles"]),
    ({"settles": False}, ["settles"]),
    ({"settles": [7]}, ["settles"]),
    ({"settles": 7}, ["settles"]),  # an id alone names no ask: ids come back
    ({"settles": {"request_id": 7}}, ["settles", "key"]),
    ({"settles": SETTLE | {"key": "d-" + "0" * 32}}, ["settles", "key"]),
    ({"settles": SETTLE | {"request_id": 0}}, ["settles", "request_id"]),
    ({"settles": SETTLE | {"extra": 1}}, ["settles", "extra"]),
    ({"ring": None}, ["ring"]),
    ({"ring": 0}, ["ring"]),
    ({"ring": "false"}, ["ring"]),
    ({"urgent": None}, ["urgent"]),
    ({"urgent": 1}, ["urgent"]),
    ({"urgent": "true"}, ["urgent"]),
    ({"urgent": [True]}, ["urgent"]),
]


@pytest.mark.parametrize(("extras", "loc"), MALFORMED, ids=lambda value: json.dumps(value)[:60])
def test_a_malformed_extra_is_a_located_422_and_writes_nothing(
    door: LiveDoor, extras: dict[str, Any], loc: list[object]
) -> None:
    before = door.written()
    with capture_logs() as logs:
        response = door.notify(row(uuid.uuid4().hex[:8], **extras))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc, response.json()
    assert [e["reason"] for e in logs if e["event"] == "door.refused"] == ["invalid_body"]
    assert door.written() == before


@pytest.mark.parametrize(
    "extra",
    [{"ask": ASK}, {"settles": SETTLE}, {"ring": False}, {"ring": True}, {"urgent": True}],
)
def test_an_extra_without_an_outbox_id_is_a_located_422(door: LiveDoor, extra: object) -> None:
    document = {"text": "t", "kind": "k"} | extra  # type: ignore[operator]
    response = door.notify(document)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == list(extra)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "extras",
    [
        {"ask": ASK},
        {"ask": ASK | {"choices": []}},
        {"ask": {"request_id": 8, "key": "q-" + "8" * 32, "title": "a text reply answers this"}},
        {"ask": ASK | {"choices": ["a", "b", "c", "é" * 24]}},
        {"settles": SETTLE},
        {"settles": SETTLE, "ring": False},
        {"ring": True},
        {"urgent": True},
        {"urgent": False},
        {"urgent": True, "ask": ASK | {"key": "q-" + "9" * 32}},
        {},  # no urgent: an ordinary report (an older notifier), never an error
    ],
    ids=lambda value: json.dumps(value)[:60],
)
def test_well_formed_extras_are_accepted(door: LiveDoor, extras: dict[str, Any]) -> None:
    outbox_id = uuid.uuid4().hex[:8]
    response = door.notify(row(outbox_id, **extras))
    assert response.status_code == 200, response.text
    assert response.json()["delivered"] is True
    assert door.chief_lines(outbox_id) == 1


@pytest.mark.parametrize(
    ("extras", "loc"), MALFORMED[::4], ids=lambda value: json.dumps(value)[:60]
)
def test_a_batch_item_with_a_malformed_extra_is_its_own_refusal(
    live: LiveDoor, extras: dict[str, Any], loc: list[object]
) -> None:
    tag = uuid.uuid4().hex[:8]
    document = {
        "items": [
            row(f"{tag}-0", ask=ASK | {"request_id": 100, "key": f"q-{tag:0>32}"}),
            row(f"{tag}-1", settles={"request_id": 100, "key": f"q-{tag:0>32}"}),
            row(f"{tag}-bad", **extras),
            *rows(2, tag + "-behind"),
        ]
    }
    refused = assert_item_refused(live, document, 2)
    assert refused["detail"][0]["loc"] == loc
    assert refused["outbox_id"] == f"{tag}-bad"
    for item in document["items"][2:]:
        assert live.chief_lines(item["outbox_id"]) == 0


# ---- the property: the door's verdict on any extras is the rules' --------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
LABELS = st.one_of(
    st.sampled_from(["approve", "decline", "Approve", "a,b", "", " ", "x" * 24, "x" * 25]),
    st.text(max_size=26),
)
GOOD_LABELS = st.lists(
    st.sampled_from(["approve", "decline", "later", "big bag", "é" * 24]), max_size=4, unique=True
)
VALID_KEYS = st.binary(min_size=16, max_size=16).map(lambda raw: "q-" + raw.hex())
ASK_KEYS = st.one_of(
    VALID_KEYS,
    st.sampled_from(["q-" + "A" * 32, "q-" + "0" * 31, "d-" + "0" * 32, "7"]),
    JSON_SCALARS,
)
ASKS = st.one_of(
    st.fixed_dictionaries(
        {
            "request_id": st.integers(1, 10_000),
            "key": VALID_KEYS,
            "title": st.text(min_size=1, max_size=20),
        },
        optional={"choices": GOOD_LABELS},
    ),
    JSON_SCALARS,
    st.fixed_dictionaries(
        {"request_id": st.one_of(st.integers(-1, 2**63), JSON_SCALARS), "title": JSON_SCALARS},
        optional={
            "key": ASK_KEYS,
            "choices": st.one_of(
                st.lists(st.one_of(LABELS, JSON_SCALARS), max_size=6), JSON_SCALARS
            ),
            "extra": JSON_SCALARS,
        },
    ),
)
EXTRAS = st.fixed_dictionaries(
    {},
    optional={
        "ask": ASKS,
        "settles": st.one_of(
            st.fixed_dictionaries({"request_id": st.integers(1, 10_000), "key": VALID_KEYS}),
            st.fixed_dictionaries(
                {"request_id": st.integers(-1, 2**63), "key": ASK_KEYS},
                optional={"extra": JSON_SCALARS},
            ),
            st.integers(1, 10_000),  # an id alone: refused (ids come back)
            JSON_SCALARS,
        ),
        "ring": st.one_of(st.booleans(), JSON_SCALARS),
        "urgent": st.one_of(st.booleans(), JSON_SCALARS),
    },
)


def _request_id(value: object) -> bool:
    return type(value) is int and 1 <= value < 2**63


def _label(value: object) -> bool:
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 24
        and "," not in value
        and all(not (ord(c) < 32 or 127 <= ord(c) < 160) for c in value)
        and all(not 0xD800 <= ord(c) <= 0xDFFF for c in value)
    )


def _ask_key(value: object) -> bool:
    return isinstance(value, str) and ASK_KEY_RE.fullmatch(value) is not None


def _settles(value: object) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"request_id", "key"}
        and _request_id(value["request_id"])
        and _ask_key(value["key"])
    )


def _ask(value: object) -> bool:
    if not isinstance(value, dict) or not set(value) <= {"request_id", "key", "title", "choices"}:
        return False
    title, choices = value.get("title"), value.get("choices", [])
    if not _request_id(value.get("request_id")) or not isinstance(title, str) or not title:
        return False
    if not _ask_key(value.get("key")):
        return False
    if any(0xD800 <= ord(c) <= 0xDFFF for c in title):
        return False
    if not isinstance(choices, list) or len(choices) > 4 or not all(map(_label, choices)):
        return False
    return len({label.casefold() for label in choices}) == len(choices)


def well_formed(extras: dict[str, Any]) -> bool:
    """The rules of SPEC21 §1, written out independently of the door's models."""
    return (
        ("ask" not in extras or _ask(extras["ask"]))
        and ("settles" not in extras or _settles(extras["settles"]))
        and ("ring" not in extras or type(extras["ring"]) is bool)
        and ("urgent" not in extras or type(extras["urgent"]) is bool)
    )


def test_the_door_judges_any_extras_as_the_rules_do_and_never_fails(live: LiveDoor) -> None:
    seen = {200: 0, 422: 0}

    @given(extras=EXTRAS)
    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def run(extras: dict[str, Any]) -> None:
        response = live.notify(row(uuid.uuid4().hex[:10], **extras))
        assert response.status_code in (200, 422), (response.status_code, response.text)
        assert (response.status_code == 200) == well_formed(extras), (extras, response.text)
        seen[response.status_code] += 1

    run()
    assert seen[200] > 10
    assert seen[422] > 10
