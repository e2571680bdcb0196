"""Two fresh ledgers behind one real door, each filing request #1 to the owner and closing it,
drained by the real notifier: each close settles its own ask message only. The second ledger's
settle names its ask by the ask key, so it never edits the first ledger's message (request
ids are reused; ask keys are random)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chief.door.router import NOTIFY_PATH
from engine import store as engine_store
from notifier.client import HttpDoorClient
from notifier.config import NotifierConfig
from notifier.delivery import Database
from notifier.worker import DrainOutcome, Worker
from tests.integration.door.conftest import LiveDoor
from tests.support.door import KEY
from tests.support.ledger import ledger
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(60)


def _produce(db: str, tag: str) -> int:
    """A todo done, a request to the owner with choices closed at a terminal, and a request to
    someone else (not reported when filed). The asked request's id."""
    ledger.add_todo(f"water the plants {tag}", actor="builder", db=db)
    ledger.done_todo(1, actor="builder", db=db)
    asked = ledger.add_request(
        f"order the bigger bag {tag}?",
        actor="agent",
        addressed_to="owner",
        choices="approve,decline",
        db=db,
    )["request"]["id"]
    ledger.add_request(f"review the door {tag}", actor="agent", addressed_to="reviewer", db=db)
    ledger.close_request(asked, actor="owner", result_summary="decline", db=db)
    return int(asked)


async def _drain(db: Path, door: LiveDoor, batch_max: int) -> None:
    config = NotifierConfig(
        db_path=db,
        door_url=door.url + NOTIFY_PATH,
        service_key=KEY,
        client_timeout_s=10.0,
        backoff_base_s=0.05,
        backoff_max_s=0.2,
        batch_max=batch_max,
    )
    worker = Worker(
        config,
        db=Database(lambda: engine_store.open_connection(config.db_path)),
        client_factory=lambda: HttpDoorClient(
            config.door_url, config.service_key, config.client_timeout_s, batch_url=config.batch_url
        ),
    )
    try:
        assert (await worker.drain()).outcome is DrainOutcome.RELEASED
    finally:
        await worker.aclose()
        await worker.db.aclose()


@pytest.mark.parametrize("batch_max", [1, 64], ids=["single", "batch"])
async def test_a_second_ledgers_settle_never_edits_the_first_ledgers_ask(
    door: LiveDoor, tmp_path: Path, batch_max: int
) -> None:
    asks = []
    for ledger_name in ("first", "second"):
        db = tmp_path / ledger_name / "coop.db"
        db.parent.mkdir()
        tag = f"{ledger_name}-{batch_max}"
        asked = _produce(str(db), tag)
        await _drain(db, door, batch_max)
        title = f"order the bigger bag {tag}?"
        first_line = f"request #{asked} from agent: {title}"
        ask = wait_until_sync(
            lambda first_line=first_line: next(
                (m for m in door.emulator.messages if m["text"].startswith(first_line)), None
            ),
            timeout_s=15,
            what=f"the {ledger_name} ledger's ask to ring",
        )
        wait_until_sync(
            lambda ask=ask: not (current(door, ask["message_id"]).get("reply_markup") or {}),
            timeout_s=15,
            what=f"the {ledger_name} ledger's settle to take its ask's buttons off",
        )
        asks.append((tag, ask["message_id"]))
    assert len({message_id for _, message_id in asks}) == 2
    for tag, message_id in asks:
        edited = current(door, message_id)
        assert edited["text"].count("closed by owner") == 1, edited["text"]
        assert edited["text"].count("order the bigger bag") == 2, edited["text"]  # ask and close
        assert all(other not in edited["text"] for other, _ in asks if other != tag)
        assert len(edited["edits"]) == 1


def current(door: LiveDoor, message_id: int) -> dict[str, object]:
    (message,) = [m for m in door.emulator.messages if m["message_id"] == message_id]
    return message
