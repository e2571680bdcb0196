"""Every guard refusal over real HTTP (uvicorn on loopback), in the issue's order, before the
body is looked at; each writes nothing and is counted under its reason, said in at most one
`door.refused` line (a reason's first at once, then a summary a minute), never with the key."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.integration.door.conftest import LiveDoor
from tests.support.door import KEY, DoorStack, body, door_stack, key_headers

pytestmark = pytest.mark.timeout(60)


def refused(
    door: LiveDoor, status: int, reason: str, headers: dict[str, str] | None = None
) -> None:
    """The door refuses a valid body with `status`/`reason`, writes nothing, counts it once and
    logs at most one event (the door is shared: this reason may have been said already)."""
    before, counted = door.written(), door.service.refusals.totals().get(reason, 0)
    with capture_logs() as logs:
        response = door.notify(body(uuid.uuid4().hex), headers=headers)
    assert (response.status_code, response.json()) == (status, {"detail": reason})
    refusals = [entry for entry in logs if entry["event"] == "door.refused"]
    assert [entry["reason"] for entry in refusals] in ([reason], [])
    assert door.service.refusals.totals()[reason] == counted + 1
    assert KEY not in repr(logs)
    assert door.written() == before


async def refused_async(stack: DoorStack, status: int, reason: str) -> None:
    with capture_logs() as logs:
        response = await stack.notify(body("1"))
    assert (response.status_code, response.json()) == (status, {"detail": reason})
    assert [entry["reason"] for entry in logs if entry["event"] == "door.refused"] == [reason]
    assert stack.emulator.messages == []
    if stack.chief is not None:
        assert await stack.chief.recent_messages(10) == []
        assert await stack.chief.sent_count() == 0


def test_door_accepts_ipv4_loopback_with_key(door: LiveDoor) -> None:
    response = door.notify(body(uuid.uuid4().hex))
    assert response.status_code == 200
    assert response.json()["delivered"] is True


async def test_door_accepts_ipv6_loopback_peer(tmp_path: Path) -> None:
    async with door_stack(tmp_path, host="::1") as stack:
        assert stack.url.startswith("http://[::1]:")
        response = await stack.notify(body("1"))
        assert response.status_code == 200, response.text
        assert stack.emulator.texts() == [body("1")["text"]]


async def test_door_refuses_peer_outside_accepted_list(tmp_path: Path) -> None:
    async with door_stack(tmp_path, settings={"CHIEF_ALLOWED_PEERS": "::1"}) as stack:
        await refused_async(stack, 403, "peer_not_allowed")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Origin", "http://127.0.0.1:8765"),
        ("Cookie", "session=abc"),
        ("X-Forwarded-For", "127.0.0.1"),
        ("Forwarded", "for=127.0.0.1"),
        ("X-Forwarded-Host", "127.0.0.1"),
        ("X-Session-Id", "abc"),
        ("X-Host-Session", "abc"),
    ],
)
def test_door_refuses_browser_and_proxy_headers(door: LiveDoor, name: str, value: str) -> None:
    refused(door, 403, "forwarded_or_browser", headers=key_headers() | {name: value})


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8765", "127.0.0.1.nip.io", "localhost.evil.example", "[::2]"],
)
def test_door_refuses_rebinding_host(door: LiveDoor, host: str) -> None:
    refused(door, 403, "host_not_loopback", headers=key_headers() | {"Host": host})


@pytest.mark.parametrize("host", ["localhost", "localhost:8765", "[::1]", "[::1]:1", "127.0.0.1"])
def test_door_accepts_loopback_host_names(door: LiveDoor, host: str) -> None:
    response = door.notify(body(uuid.uuid4().hex), headers=key_headers() | {"Host": host})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "key",
    [
        None,
        "",
        "x" * len(KEY),  # same length, wrong
        KEY[:-1] + ("0" if KEY[-1] != "0" else "1"),  # one character off
        KEY[:5],  # shorter
        KEY + "extra",  # longer
    ],
    ids=["missing", "empty", "equal-length", "one-off", "shorter", "longer"],
)
def test_door_refuses_wrong_service_key(door: LiveDoor, key: str | None) -> None:
    headers = {} if key is None else {"X-Coop-Service-Key": key}
    refused(door, 401, "service_key_invalid", headers=headers)


@pytest.mark.parametrize(
    ("document", "status", "reason"),
    [
        ({"state": "blocked"}, 403, "posture_blocked"),
        ({"state": "locked"}, 403, "posture_locked"),
        ({"state": "open"}, 503, "posture_unavailable"),
        ({"state": "NORMAL"}, 503, "posture_unavailable"),
        ({"state": 1}, 503, "posture_unavailable"),
        ({}, 503, "posture_unavailable"),
        (["normal"], 503, "posture_unavailable"),
        ("{not json", 503, "posture_unavailable"),
        (None, 503, "posture_unavailable"),  # the configured file is missing
    ],
)
def test_door_refuses_on_posture(
    door: LiveDoor, document: object, status: int, reason: str
) -> None:
    if isinstance(document, str):
        door.posture_path.write_text(document)
    elif document is None:
        door.posture_path.unlink()
    else:
        door.posture_path.write_text(json.dumps(document))
    refused(door, status, reason)


def test_door_posture_change_applies_at_once(door: LiveDoor) -> None:
    assert door.notify(body(uuid.uuid4().hex)).status_code == 200
    door.posture_path.write_text('{"state": "locked"}')
    refused(door, 403, "posture_locked")


async def test_door_without_owner_answers_503(tmp_path: Path) -> None:
    async with door_stack(tmp_path, owner=None) as stack:
        await refused_async(stack, 503, "owner_unconfigured")


def test_door_guard_runs_in_order(door: LiveDoor) -> None:
    # Each request fails several checks; the first in the order answers.
    door.posture_path.write_text('{"state": "blocked"}')
    wrong_key = {"X-Coop-Service-Key": "nope"}
    refused(door, 403, "forwarded_or_browser", headers=wrong_key | {"Origin": "x", "Host": "e"})
    refused(door, 403, "host_not_loopback", headers=wrong_key | {"Host": "evil"})
    refused(door, 401, "service_key_invalid", headers=wrong_key)
    refused(door, 403, "posture_blocked")


async def test_door_without_owner_checks_posture_first(tmp_path: Path) -> None:
    posture = tmp_path / "posture.json"
    posture.write_text('{"state": "locked"}')
    settings = {"CHIEF_POSTURE_FILE": str(posture)}
    async with door_stack(tmp_path, owner=None, settings=settings) as stack:
        await refused_async(stack, 403, "posture_locked")


def test_door_guard_answers_before_the_body_is_read(door: LiveDoor) -> None:
    before = door.written()
    for content in (b"{not json", b'{"text": 1, "extra": true}', b""):
        response = door.post_raw(content, headers={})
        assert (response.status_code, response.json()) == (401, {"detail": "service_key_invalid"})
        response = door.post_raw(content, headers=key_headers() | {"Cookie": "a=b"})
        assert (response.status_code, response.json()) == (403, {"detail": "forwarded_or_browser"})
    assert door.written() == before


def test_door_status_uses_the_same_guard(door: LiveDoor) -> None:
    url = door.url + "/api/coop/engine/status"
    response = door.client.get(url)
    assert (response.status_code, response.json()) == (401, {"detail": "service_key_invalid"})
    response = door.client.get(url, headers=key_headers() | {"Origin": "x"})
    assert (response.status_code, response.json()) == (403, {"detail": "forwarded_or_browser"})
