"""The Chief's door takes the notify extras of issue 21 (`ask`, `settles`, `ring`) on the single
and the batch route, and its body stays strict: any other field is refused with 422 and
writes nothing (tests/integration/notifier/test_notifier_extras.py has the notifier sending
them through a recorder; the asks' own tests what each extra does)."""

from __future__ import annotations

import pytest

from tests.integration.door.conftest import LiveDoor

pytestmark = pytest.mark.timeout(60)

VALID = {"text": "request #7 from agent: order the bigger bag?", "kind": "request_added"}
KEY = "q-" + "7" * 32
EXTRAS = [
    {
        "ask": {
            "request_id": 7,
            "key": KEY,
            "title": "order the bigger bag?",
            "choices": ["approve"],
        }
    },
    {"settles": {"request_id": 7, "key": KEY}},
    {"settles": {"request_id": 7, "key": KEY}, "ring": False},
]


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: ",".join(e))
def test_the_door_takes_the_extras_on_both_routes(door: LiveDoor, extra: dict[str, object]) -> None:
    single = door.notify(VALID | {"outbox_id": "d-phone-1"} | extra)
    batch = door.notify_batch({"items": [VALID | {"outbox_id": "d-phone-2"} | extra]})
    assert single.status_code == 200, single.text
    assert single.json()["delivered"] is True
    assert batch.status_code == 200, batch.text
    (item,) = batch.json()["items"]
    assert item["delivered"] is True, item


def test_any_other_field_is_still_refused_and_writes_nothing(door: LiveDoor) -> None:
    before = door.written()
    extra = {"answer": {"request_id": 7}}
    single = door.notify(VALID | {"outbox_id": "d-phone-1"} | extra)
    batch = door.notify_batch({"items": [VALID | {"outbox_id": "d-phone-2"} | extra]})
    assert single.status_code == 422, single.text
    assert {e["type"] for e in single.json()["detail"]} == {"extra_forbidden"}
    assert batch.status_code == 200, batch.text
    (item,) = batch.json()["items"]
    assert (item["delivered"], item["refused"]) == (False, 422), item
    assert door.written() == before
