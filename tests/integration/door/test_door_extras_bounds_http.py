"""The door holds every bound of the nag fields where the value enters, exactly as the engine
files them (`plumbing.bounds`): `remind.max` 1..100, `remind.every_s` 1 s .. a year and a day,
`deadline_at` at most a year and a day ahead. One value past a bound is one 422 naming the
field, and writes nothing (real HTTP, a valid key). Before, the door took `remind.max:
1000000000` (only the engine bounded it at 100).

The property over the whole family (every field, any value past its bound) is
tests/integration/door/test_door_deadline_body_http.py's, whose rules are the engine's."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from plumbing.bounds import MAX_REMIND_MAX, MAX_WAIT_S
from tests.integration.door.conftest import LiveDoor
from tests.integration.door.test_door_extras_body_http import ASK, row

pytestmark = pytest.mark.timeout(120)

REMIND = {"every_s": 1800, "max": 3}
MAX_EPOCH_S = 253_402_300_799


def _refused_at(door: LiveDoor, extras: dict[str, Any], loc: list[object]) -> None:
    before = door.written()
    response = door.notify(row(uuid.uuid4().hex[:8], **extras))
    assert response.status_code == 422, response.text
    assert [error["loc"] for error in response.json()["detail"]] == [loc], response.json()
    assert door.written() == before


def test_a_billion_reminders_is_refused_naming_the_field(door: LiveDoor) -> None:
    _refused_at(
        door, {"ask": ASK | {"remind": REMIND | {"max": 1_000_000_000}}}, ["ask", "remind", "max"]
    )


def test_each_bound_itself_is_taken(door: LiveDoor) -> None:
    ask = ASK | {
        "remind": {"every_s": MAX_WAIT_S, "max": MAX_REMIND_MAX},
        "deadline_at": time.time() + MAX_WAIT_S - 60,
    }
    outbox_id = uuid.uuid4().hex[:8]
    response = door.notify(row(outbox_id, ask=ask))
    assert response.status_code == 200, response.text
    assert door.chief_lines(outbox_id) == 1


PAST = {
    "max": (st.integers(MAX_REMIND_MAX + 1, 2**63 - 1), ["ask", "remind", "max"]),
    "every_s": (
        st.one_of(
            st.integers(MAX_WAIT_S + 1, MAX_EPOCH_S), st.floats(MAX_WAIT_S + 0.001, MAX_EPOCH_S)
        ),
        ["ask", "remind", "every_s"],
    ),
    "deadline_s": (st.floats(MAX_WAIT_S + 120, MAX_EPOCH_S / 2), ["ask", "deadline_at"]),
}


def test_every_value_past_the_engines_bound_is_a_422(live: LiveDoor) -> None:
    @given(field=st.sampled_from(sorted(PAST)), data=st.data())
    @settings(
        max_examples=90,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],  # one accepted ask rings: shrinking would ring for minutes
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def run(field: str, data: st.DataObject) -> None:
        values, loc = PAST[field]
        value = data.draw(values)
        if field == "deadline_s":
            ask = ASK | {"deadline_at": time.time() + value}
        else:
            ask = ASK | {"remind": REMIND | {field: value}}
        _refused_at(live, {"ask": ask}, loc)

    run()
