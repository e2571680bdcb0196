"""Schemathesis against the door's own OpenAPI, with a valid key, over real HTTP: hundreds of
generated bodies (fitting the schema and not) and not one 5xx."""

from __future__ import annotations

from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from tests.integration.door.conftest import LiveDoor
from tests.support.door import key_headers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

# Case generation is most of this module's CPU (schemathesis' negative bodies), not the HTTP. The
# notify extras and the batch bodies have property tests of their own over real HTTP, which also
# assert no server error: tests/integration/door/test_door_extras_body_http.py (generated extras,
# 150 examples, the door's verdict equal to the rules') and test_door_batch_body_http.py (a
# generated defect in any item, 120 examples). So this fuzz over the schema runs 250 and 30.
NOTIFY_CASES = 250
BATCH_CASES = 30
STATUS_CASES = 30
MIN_NOTIFY_CASES = NOTIFY_CASES


def _strategy(live: LiveDoor, path: str, method: str) -> st.SearchStrategy:  # type: ignore[type-arg]
    operation = schemathesis.openapi.from_dict(live.openapi)[path][method]
    # The key is fixed (a valid one), so negative cases mutate the body, not the credential.
    return st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE, headers=key_headers()),
        operation.as_strategy(GenerationMode.NEGATIVE, headers=key_headers()),
    )


EXTRAS = ("ask", "settles", "ring")


def _fuzz(
    live: LiveDoor, path: str, method: str, cases: int, extras: Counter[str] | None = None
) -> Counter[int]:
    statuses: Counter[int] = Counter()

    @given(case=_strategy(live, path, method))
    @settings(
        max_examples=cases,
        derandomize=True,
        deadline=None,
        database=None,
        # Real HTTP per case is the point; schemathesis bodies are large and often filtered.
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case) -> None:
        response = case.call(base_url=live.url, headers=key_headers())
        statuses[response.status_code] += 1
        if extras is not None and isinstance(case.body, dict):
            extras.update(name for name in EXTRAS if name in case.body)
        assert response.status_code < 500, (response.status_code, response.text, case.body)

    run()
    return statuses


def test_door_fuzzed_notify_never_answers_a_server_error(live: LiveDoor) -> None:
    extras: Counter[str] = Counter()
    statuses = _fuzz(live, "/api/coop/engine/notify", "POST", NOTIFY_CASES, extras)
    assert sum(statuses.values()) >= MIN_NOTIFY_CASES, statuses
    # The notify extras are in the schema, so the fuzz reaches them too (valid and not).
    assert all(extras[name] > 0 for name in EXTRAS), extras
    # Both kinds of case reached the door's logic: accepted bodies and refused ones.
    assert statuses[200] > 0
    assert statuses[422] > 0
    assert set(statuses) <= {200, 422}, statuses
    assert live.status()["notify_locks"] == 0


def test_door_fuzzed_notify_batch_never_answers_a_server_error(live: LiveDoor) -> None:
    statuses = _fuzz(live, "/api/coop/engine/notify-batch", "POST", BATCH_CASES)
    assert statuses[200] > 0
    assert statuses[422] > 0
    assert set(statuses) <= {200, 422}, statuses
    assert live.status()["notify_locks"] == 0


def test_door_fuzzed_status_never_answers_a_server_error(live: LiveDoor) -> None:
    statuses = _fuzz(live, "/api/coop/engine/status", "GET", STATUS_CASES)
    assert set(statuses) <= {200, 403}, statuses
