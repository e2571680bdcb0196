"""Issue 28's fields of the notify extras (`ask.deadline_at`, `ask.default`, `ask.remind`;
`settles.by`, `settles.outcome`, `settles.choice`) are taken as strictly as the others: each
malformed one is a 422 located at the field that writes nothing, and a property test over
generated values finds the door's verdict equal to the contract's rules, never a server error
(real HTTP, a valid key, after the guard passed)."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumbing.bounds import MAX_REMIND_MAX, MAX_WAIT_S
from tests.integration.door.conftest import LiveDoor
from tests.integration.door.test_door_extras_body_http import (
    ASK,
    JSON_SCALARS,
    SETTLE,
    _label,
    row,
)

pytestmark = pytest.mark.timeout(120)

# A day ahead: the door takes a deadline at most the engine's longest wait ahead (`MAX_WAIT_S`).
SOON = int(time.time()) + 86_400
DEADLINE = {"deadline_at": SOON + 0.5, "default": "decline"}
REMIND = {"every_s": 1800, "max": 3}
BY_DEADLINE = {"by": "deadline", "outcome": "closed", "choice": "decline"}
MAX_EPOCH_S = 253_402_300_799  # 9999-12-31T23:59:59Z: a deadline past it cannot be shown

MALFORMED: list[tuple[dict[str, Any], list[object]]] = [
    ({"ask": ASK | {"deadline_at": None}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"deadline_at": "1900000000"}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"deadline_at": True}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"deadline_at": 0}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"deadline_at": -5}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"deadline_at": 10**12}}, ["ask", "deadline_at"]),
    ({"ask": ASK | {"default": None, "deadline_at": 5}}, ["ask", "default"]),
    ({"ask": ASK | {"default": "decline"}}, ["ask", "default"]),  # no deadline
    ({"ask": ASK | DEADLINE | {"default": "maybe"}}, ["ask", "default"]),
    ({"ask": ASK | DEADLINE | {"default": "Decline"}}, ["ask", "default"]),
    ({"ask": ASK | DEADLINE | {"default": 1}}, ["ask", "default"]),
    ({"ask": ASK | {"remind": None}}, ["ask", "remind"]),
    ({"ask": ASK | {"remind": 1800}}, ["ask", "remind"]),
    ({"ask": ASK | {"remind": {"every_s": 1800}}}, ["ask", "remind", "max"]),
    ({"ask": ASK | {"remind": {"max": 3}}}, ["ask", "remind", "every_s"]),
    ({"ask": ASK | {"remind": REMIND | {"every_s": 0.5}}}, ["ask", "remind", "every_s"]),
    ({"ask": ASK | {"remind": REMIND | {"every_s": "30m"}}}, ["ask", "remind", "every_s"]),
    ({"ask": ASK | {"remind": REMIND | {"every_s": None}}}, ["ask", "remind", "every_s"]),
    ({"ask": ASK | {"remind": REMIND | {"max": 0}}}, ["ask", "remind", "max"]),
    ({"ask": ASK | {"remind": REMIND | {"max": 2.0}}}, ["ask", "remind", "max"]),
    ({"ask": ASK | {"remind": REMIND | {"max": True}}}, ["ask", "remind", "max"]),
    ({"ask": ASK | {"remind": REMIND | {"max": 2**63}}}, ["ask", "remind", "max"]),
    ({"ask": ASK | {"remind": REMIND | {"extra": 1}}}, ["ask", "remind", "extra"]),
    ({"settles": SETTLE | {"by": None}}, ["settles", "by"]),
    ({"settles": SETTLE | {"by": "ledger", "outcome": "closed"}}, ["settles", "by"]),
    ({"settles": SETTLE | {"by": "deadline"}}, ["settles"]),  # no outcome
    ({"settles": SETTLE | {"outcome": "closed"}}, ["settles", "outcome"]),  # no by
    ({"settles": SETTLE | BY_DEADLINE | {"outcome": "done"}}, ["settles", "outcome"]),
    ({"settles": SETTLE | BY_DEADLINE | {"outcome": None}}, ["settles", "outcome"]),
    ({"settles": SETTLE | BY_DEADLINE | {"outcome": "abandoned"}}, ["settles", "choice"]),
    ({"settles": SETTLE | BY_DEADLINE | {"choice": None}}, ["settles", "choice"]),
    ({"settles": SETTLE | BY_DEADLINE | {"choice": "a,b"}}, ["settles", "choice"]),
    ({"settles": SETTLE | BY_DEADLINE | {"choice": 3}}, ["settles", "choice"]),
]


@pytest.mark.parametrize(("extras", "loc"), MALFORMED, ids=lambda value: json.dumps(value)[:70])
def test_a_malformed_deadline_or_reminder_field_is_a_located_422_and_writes_nothing(
    door: LiveDoor, extras: dict[str, Any], loc: list[object]
) -> None:
    before = door.written()
    response = door.notify(row(uuid.uuid4().hex[:8], **extras))
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == loc, response.json()
    assert door.written() == before


@pytest.mark.parametrize(
    "extras",
    [
        {"ask": ASK | DEADLINE},
        {"ask": ASK | {"deadline_at": SOON}},  # an integer is a number too
        {"ask": ASK | {"remind": REMIND}},
        {"ask": ASK | DEADLINE | {"remind": {"every_s": 1.5, "max": 10}}},
        {"settles": SETTLE | BY_DEADLINE},
        {"settles": SETTLE | {"by": "deadline", "outcome": "abandoned"}},
        {"settles": SETTLE | {"by": "deadline", "outcome": "closed"}},
    ],
    ids=lambda value: json.dumps(value)[:70],
)
def test_well_formed_deadline_and_reminder_fields_are_accepted(
    door: LiveDoor, extras: dict[str, Any]
) -> None:
    outbox_id = uuid.uuid4().hex[:8]
    response = door.notify(row(outbox_id, **extras))
    assert response.status_code == 200, response.text
    assert door.chief_lines(outbox_id) == 1


# ---- the property: the door's verdict on any of the new fields is the contract's ---------

NUMBERS = st.one_of(
    st.integers(-3, 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            *(0.5, 1, 1.0, 3, MAX_REMIND_MAX, MAX_REMIND_MAX + 1, MAX_WAIT_S, MAX_WAIT_S + 1),
            *(SOON, SOON + MAX_WAIT_S, MAX_EPOCH_S, MAX_EPOCH_S + 1),
        ]
    ),
)
LABELS = st.one_of(st.sampled_from(["approve", "decline", "Decline", "maybe", "a,b", ""]))
ASK_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "deadline_at": st.one_of(NUMBERS, JSON_SCALARS),
        "default": st.one_of(LABELS, JSON_SCALARS),
        "remind": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "every_s": st.one_of(NUMBERS, JSON_SCALARS),
                    "max": st.one_of(NUMBERS, JSON_SCALARS),
                    "extra": JSON_SCALARS,
                },
            ),
            JSON_SCALARS,
        ),
    },
)
SETTLE_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "by": st.one_of(st.just("deadline"), JSON_SCALARS),
        "outcome": st.one_of(st.sampled_from(["closed", "abandoned", "done"]), JSON_SCALARS),
        "choice": st.one_of(LABELS, JSON_SCALARS),
    },
)


def _number(value: object, low: float, high: float) -> bool:
    if type(value) not in (int, float):
        return False
    return math.isfinite(value) and low <= value <= high  # type: ignore[arg-type]


def _ask_fields(fields: dict[str, Any]) -> bool:
    """Contract §1.1, written out independently of the door's models, with the engine's bounds
    (`plumbing.bounds`): a deadline at most a year and a day ahead, a reminder every 1 s to a
    year and a day, at most 100 of them."""
    latest = min(time.time() + MAX_WAIT_S, MAX_EPOCH_S)
    if "deadline_at" in fields and not _number(fields["deadline_at"], 1e-300, latest):
        return False
    default = fields.get("default", "decline")
    if "default" in fields and ("deadline_at" not in fields or default not in ASK["choices"]):
        return False
    if "remind" in fields:
        remind = fields["remind"]
        if not isinstance(remind, dict) or set(remind) != {"every_s", "max"}:
            return False
        if not _number(remind["every_s"], 1, MAX_WAIT_S):
            return False
        if type(remind["max"]) is not int or not 1 <= remind["max"] <= MAX_REMIND_MAX:
            return False
    return True


def _settle_fields(fields: dict[str, Any]) -> bool:
    """Contract §1.3: `by` and `outcome` together, `choice` only with a close."""
    if not fields:
        return True
    if fields.get("by") != "deadline" or fields.get("outcome") not in ("closed", "abandoned"):
        return False
    if "choice" in fields:
        return fields["outcome"] == "closed" and _label(fields["choice"])
    return True


def test_the_door_judges_the_new_fields_as_the_contract_does(live: LiveDoor) -> None:
    seen = {200: 0, 422: 0}

    @given(ask=ASK_FIELDS, settle=SETTLE_FIELDS, which=st.sampled_from(["ask", "settles"]))
    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def run(ask: dict[str, Any], settle: dict[str, Any], which: str) -> None:
        if which == "ask":
            extras, good = {"ask": ASK | ask}, _ask_fields(ask)
        else:
            extras, good = {"settles": SETTLE | settle}, _settle_fields(settle)
        response = live.notify(row(uuid.uuid4().hex[:10], **extras))
        assert response.status_code in (200, 422), (response.status_code, response.text)
        assert (response.status_code == 200) == good, (extras, response.text)
        seen[response.status_code] += 1

    run()
    assert seen[200] > 10
    assert seen[422] > 10
