"""A keyless client floods no log: the door (`chief serve`) and the engine service (`coop serve`)
count every refusal, and say each reason at most once a minute (its first refusal at once, then
a summary with the count, the first peer and how long since), while their `/metrics` counts
every one. Real processes, real HTTP on each service's Unix socket (and, for the door's Host
check, on its `/metrics` TCP port, the one place a Host can be forged), a bounded loop of N
requests per reason.

(Before: 5,168 `door.refused` warnings in 3 s from one keyless client, and `coop serve` logged
`phone.refused`/`owner.refused` the same way.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.door.conftest import NOTIFY_URL, DoorProcess, clean_env, spawn_door
from tests.e2e.owner.conftest import ServeProcess
from tests.e2e.owner.conftest import stack_env as stack_env  # the engine service's fixture
from tests.support.door import write_key

# Each reason's refusals in a bounded loop: enough that one line each would be unmistakable
# (50 lines where one is allowed; the flood before the fix logged 5,168 in 3 s).
N = 50
TIMEOUT_S = 30.0


def _metric(url: str, name: str) -> dict[str, float]:
    """`name`'s samples by their `reason` label, scraped as Prometheus does (keyless)."""
    answer = httpx.get(url + "/metrics")
    assert answer.status_code == 200, answer.text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name == name:
                found[sample.labels["reason"]] = sample.value
    return found


def _flood(where: str, path: str, count: int, *, method: str = "POST", **headers: str) -> None:
    """`count` requests to `where`: a Unix socket's path, or a TCP base URL."""
    on_socket = not where.startswith("http")
    transport = httpx.HTTPTransport(uds=where) if on_socket else None
    base = "http://localhost" if on_socket else where
    with httpx.Client(timeout=TIMEOUT_S, transport=transport) as client:
        for _ in range(count):
            answer = client.request(method, base + path, json={}, headers=headers)
            assert answer.status_code in (401, 403, 404, 409), answer.text


def _lines_by_reason(events: list[dict[str, object]]) -> Counter[str]:
    return Counter(str(event["reason"]) for event in events)


@pytest.fixture
def door(tmp_path: Path) -> Iterator[DoorProcess]:
    write_key(tmp_path)
    env = clean_env(
        tmp_path, COOP_SERVICE_KEY_FILE=str(tmp_path / "service.key"), CHIEF_METRICS_PORT="0"
    )
    process = spawn_door(env)
    try:
        yield process
    finally:
        process.close()


def test_the_door_says_each_refusal_reason_once_and_counts_every_one(door: DoorProcess) -> None:
    metrics = door.metrics_base()
    _flood(door.socket_path, NOTIFY_URL, N)  # no key
    _flood(door.socket_path, NOTIFY_URL, N, **{"X-Coop-Service-Key": "wrong"})
    _flood(metrics, "/metrics", N, method="GET", Host="evil.example")

    lines = _lines_by_reason(door.events("door.refused"))
    assert lines == {"service_key_invalid": 1, "host_not_loopback": 1}, lines
    counted = _metric(metrics, "coop_door_refusals_total")
    assert counted == {"service_key_invalid": 2 * N, "host_not_loopback": N}, counted

    door.terminate()  # the stop says what the minute had not said yet
    tail = [e for e in door.events("door.refused") if e["reason"] == "service_key_invalid"]
    assert [e["count"] for e in tail] == [1, 2 * N - 1], tail


def test_coop_serve_says_each_refusal_reason_once_and_counts_every_one(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    serve = ServeProcess(tmp_path, stack_env).start()
    try:
        where = serve.socket_path
        _flood(where, "/api/coop/phone/summary", N, method="GET")  # no service key
        _flood(where, "/compat/call", N)  # no owner credential (local mode: 409)
        _flood(where, "/status", N, method="GET", Host="evil.example")

        phone = _lines_by_reason(serve.events("phone.refused"))
        owner = _lines_by_reason(serve.events("owner.refused"))
        assert phone == {"service_key": 1}, phone
        assert owner == {"local_mode": 1, "host": 1}, owner
        counted = _metric(serve.metrics_url, "coop_service_refusals_total")
        assert counted == {"service_key": N, "local_mode": N, "host": N}, counted
    finally:
        serve.stop_quietly()
