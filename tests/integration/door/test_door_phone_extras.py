"""The Chief's door as it stands before it learns the notify extras of issue 21 (`ask`,
`settles`, `ring`): its strict body refuses each with 422 and writes nothing, on the single and
the batch route. The notifier sends them only on the rows that carry them, so until the door
accepts them those rows are deferred with the door's reason, and every ordinary row is
delivered as before. When the door accepts them this test turns into the real-door test of the
extras (tests/integration/notifier/test_notifier_extras.py has them through a recorder)."""

from __future__ import annotations

import pytest

from tests.integration.door.conftest import LiveDoor

pytestmark = pytest.mark.timeout(60)

VALID = {"text": "request #7 from agent: order the bigger bag?", "kind": "request_added"}
EXTRAS = [
    {"ask": {"request_id": 7, "title": "order the bigger bag?", "choices": ["approve"]}},
    {"settles": 7},
    {"settles": 7, "ring": False},
]


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: ",".join(e))
def test_the_door_refuses_the_extras_today(door: LiveDoor, extra: dict[str, object]) -> None:
    before = door.written()
    single = door.notify(VALID | {"outbox_id": "d-phone-1"} | extra)
    batch = door.notify_batch({"items": [VALID | {"outbox_id": "d-phone-2"} | extra]})
    assert single.status_code == 422, single.text
    assert {e["type"] for e in single.json()["detail"]} == {"extra_forbidden"}
    # The batch route judges each item: this one is refused with its own 422.
    assert batch.status_code == 200, batch.text
    (item,) = batch.json()["items"]
    assert (item["delivered"], item["refused"]) == (False, 422), item
    assert {e["type"] for e in item["detail"]} == {"extra_forbidden"}
    assert door.written() == before
