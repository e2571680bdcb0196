"""The body is exactly {text: 1..4000, kind, outbox_id?}: every other shape is 422 and writes
nothing (checked over real HTTP, with a valid key, after the guard passed)."""

from __future__ import annotations

import json
import uuid

import pytest
from structlog.testing import capture_logs

from tests.integration.door.conftest import LiveDoor

pytestmark = pytest.mark.timeout(60)

VALID = {"text": "todo #3 done", "kind": "todo.done", "outbox_id": "3"}


@pytest.mark.parametrize(
    "document",
    [
        VALID | {"extra": "field"},
        VALID | {"chat_id": 1},
        {"kind": "todo.done", "outbox_id": "3"},  # text missing
        {"text": "todo #3 done", "outbox_id": "3"},  # kind missing
        {},
        VALID | {"text": 3},
        VALID | {"text": None},
        VALID | {"text": ["a"]},
        VALID | {"kind": 1},
        VALID | {"kind": None},
        VALID | {"outbox_id": 3},  # strict: an integer id is not a string
        VALID | {"outbox_id": ""},
        VALID | {"outbox_id": "has space"},
        VALID | {"outbox_id": "x" * 129},
        VALID | {"text": ""},
        VALID | {"text": "   \n"},
        VALID | {"text": "x" * 4001},
        VALID | {"kind": ""},
        VALID | {"kind": "k" * 101},
        ["text", "kind"],
        "text",
        None,
    ],
    ids=lambda document: json.dumps(document)[:60],
)
def test_door_refuses_bad_body_with_422(door: LiveDoor, document: object) -> None:
    before = door.written()
    with capture_logs() as logs:
        response = door.notify(document)
    assert response.status_code == 422, response.text
    assert isinstance(response.json()["detail"], list)
    assert [e["reason"] for e in logs if e["event"] == "door.refused"] == ["invalid_body"]
    assert door.written() == before


@pytest.mark.parametrize(
    "content",
    [b"", b"{not json", b'{"text": "\\ud800", "kind": "k"}', b"\xff\xfe", b"[]", b"null"],
    ids=["empty", "not-json", "lone-surrogate", "not-utf8", "array", "null"],
)
def test_door_refuses_unparseable_body_with_422(door: LiveDoor, content: bytes) -> None:
    before = door.written()
    response = door.post_raw(content)
    assert response.status_code == 422, response.text
    assert door.written() == before


def test_door_refuses_oversized_body_with_413(door: LiveDoor) -> None:
    before = door.written()
    response = door.post_raw(b'{"text": "' + b"x" * (2 * 1024 * 1024) + b'", "kind": "k"}')
    assert (response.status_code, response.json()) == (413, {"detail": "body_too_large"})
    assert door.written() == before


def test_door_accepts_4000_characters_and_no_outbox_id(door: LiveDoor) -> None:
    text = "é" * 3999 + "!"
    response = door.notify({"text": text, "kind": "todo.done"})
    assert response.status_code == 200, response.text
    door.wait_rung(text)


def test_door_accepts_explicit_null_outbox_id(door: LiveDoor) -> None:
    text = f"no row {uuid.uuid4().hex}"
    response = door.notify({"text": text, "kind": "notice", "outbox_id": None})
    assert response.status_code == 200
    answer = response.json()
    assert answer.pop("telegram") in {"sent", "queued"}
    answer.pop("telegram_message_id", None)
    assert answer == {
        "delivered": True,
        "channel": "telegram",
        "outbox_id": None,
        "chief_message_id": None,
    }
    door.wait_rung(text)
