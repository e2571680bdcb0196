"""The notify extras (issue 21) from the ledger's verbs to the door's body: a request filed to
the owner carries `ask`, its close `settles`, and the notifier sends a row's extras merged into
its body (single route) or its batch item; an ordinary row's body is exactly what it was.

The far end is the test door (`tests.support.loopback_door.TestDoor`), a recorder on real
uvicorn: the Chief's door refuses these fields with 422 until it learns them
(tests/integration/door/test_door_phone_extras.py), so an end-to-end test against the real
door comes with that change."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from engine import store as engine_store
from notifier.client import FakeDoorClient, HttpDoorClient, payload
from notifier.config import NotifierConfig
from notifier.delivery import Database, OutboxRow
from notifier.worker import DrainOutcome, Worker
from tests.integration.notifier.notifier_helpers import make_config
from tests.support.ledger import ledger
from tests.support.loopback_door import TestDoor, bound_socket, serve_door

pytestmark = pytest.mark.timeout(60)


def test_a_row_without_extras_sends_exactly_the_ordinary_body() -> None:
    row = OutboxRow(7, "todo_done", "todo #1 done by builder: x", 0, 0.0, "d-" + "0" * 32)
    body = payload(row)
    assert body == {"text": row.text, "kind": row.kind, "outbox_id": row.delivery_key}
    assert json.dumps(body, separators=(",", ":")) == (
        '{"text":"todo #1 done by builder: x","kind":"todo_done","outbox_id":"d-' + "0" * 32 + '"}'
    )


def test_a_rows_extras_follow_its_three_fields_and_never_replace_them() -> None:
    settles = {"request_id": 3, "key": "q-" + "3" * 32}
    extra = {"settles": settles, "ring": False, "outbox_id": "forged", "text": "forged"}
    row = OutboxRow(8, "request_closed", "request #3 closed", 0, 0.0, "d-1", extra)
    assert payload(row) == {
        "text": "request #3 closed",
        "kind": "request_closed",
        "outbox_id": "d-1",
        "settles": settles,
        "ring": False,
    }


def _produce(db: str) -> int:
    """What a household does: a todo done, a request to the owner with choices, closed at a
    terminal, and a request to someone else (not reported when filed). The asked request's id."""
    ledger.add_todo("water the plants", actor="builder", db=db)
    ledger.done_todo(1, actor="builder", db=db)
    asked = ledger.add_request(
        "order the bigger bag?",
        actor="agent",
        addressed_to="owner",
        choices="approve,decline",
        db=db,
    )["request"]["id"]
    ledger.add_request("review the door", actor="agent", addressed_to="reviewer", db=db)
    ledger.close_request(asked, actor="owner", result_summary="decline", db=db)
    return int(asked)


def _worker(config: NotifierConfig) -> Worker:
    return Worker(
        config,
        db=Database(lambda: engine_store.open_connection(config.db_path)),
        client_factory=lambda: HttpDoorClient(
            str(config.door_socket), config.service_key, config.client_timeout_s
        ),
    )


def _ask_key(db: str, request_id: int) -> str:
    with closing(sqlite3.connect(db)) as conn:
        (found,) = conn.execute(
            "SELECT ask_key FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
    return str(found)


def _expected(asked: int, key: str) -> list[dict[str, object]]:
    """What the door receives, key by key (the text and outbox_id aside)."""
    return [
        {"kind": "todo_done"},
        {
            "kind": "request_added",
            "ask": {
                "request_id": asked,
                "key": key,
                "title": "order the bigger bag?",
                "choices": ["approve", "decline"],
            },
        },
        {"kind": "request_closed", "settles": {"request_id": asked, "key": key}},
    ]


@pytest.mark.parametrize("batch_route", [False, True], ids=["single", "batch"])
async def test_the_notifier_sends_each_rows_extras_in_its_body(
    tmp_path: Path, batch_route: bool
) -> None:
    db = str(tmp_path / "coop.db")
    asked = _produce(db)
    door = TestDoor(batch_route=batch_route)
    with bound_socket(tmp_path / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            worker = _worker(make_config(Path(db), socket_path, batch_max=64 if batch_route else 1))
            try:
                assert (await worker.drain()).outcome is DrainOutcome.RELEASED
            finally:
                await worker.aclose()
                await worker.db.aclose()
    received = door.received
    assert door.batches == (1 if batch_route else 0)
    assert [{k: v for k, v in r.items() if k not in ("text", "outbox_id")} for r in received] == (
        _expected(asked, _ask_key(db, asked))
    )
    assert set(received[0]) == {"text", "kind", "outbox_id"}  # an ordinary row, as before
    assert received[1]["text"] == (
        f"request #{asked} from agent: order the bigger bag? (approve / decline)"
    )


async def test_the_fake_door_records_the_extras_as_sent(tmp_path: Path) -> None:
    db = str(tmp_path / "coop.db")
    ledger.add_request("any news?", actor="agent", addressed_to="owner", db=db)
    fake = FakeDoorClient()
    worker = Worker(
        make_config(Path(db), batch_max=1),
        db=Database(lambda: engine_store.open_connection(db)),
        client_factory=lambda: fake,  # type: ignore[arg-type,return-value]
    )
    try:
        await worker.drain()
    finally:
        await worker.aclose()
        await worker.db.aclose()
    (sent,) = fake.sent
    key = _ask_key(db, 1)
    assert sent["ask"] == {"request_id": 1, "key": key, "title": "any news?", "choices": []}
    assert sent["text"] == "request #1 from agent: any news? (reply to answer)"
