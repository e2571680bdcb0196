"""Two fresh ledgers behind one real door, each filing request #1 to the owner and closing it,
drained by the real notifier: each close settles its own ask message only. The second ledger's
settle names its ask by the ask key, so it never edits the first ledger's message (request
ids are reused; ask keys are random)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

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


def _ask(db: str, tag: str) -> int:
    """A todo done, a request to the owner with choices, and a request to someone else (not
    reported when filed). The asked request's id."""
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
    return int(asked)


async def _drain(db: Path, door: LiveDoor, batch_max: int) -> None:
    config = NotifierConfig(
        db_path=db,
        door_socket=Path(door.socket_path),
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
            str(config.door_socket), config.service_key, config.client_timeout_s
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
    """Both ledgers ask their request #1 (both asks live on the phone); the second closes its
    own: its message alone is settled, the first's keeps its text and its live buttons; then
    the first closes its own, and its message shows that close alone."""
    dbs, asks = {}, {}
    for name in ("first", "second"):
        dbs[name] = tmp_path / name / "coop.db"
        dbs[name].parent.mkdir()
        tag = f"{name}-{batch_max}"
        asked = _ask(str(dbs[name]), tag)
        await _drain(dbs[name], door, batch_max)
        first_line = f"request #{asked} from agent: order the bigger bag {tag}?"
        asks[name] = copy.deepcopy(
            wait_until_sync(
                lambda first_line=first_line: next(
                    (m for m in door.emulator.messages if m["text"].startswith(first_line)), None
                ),
                timeout_s=15,
                what=f"the {name} ledger's ask to ring",
            )
        )  # a copy: the emulator edits its message in place
        assert asks[name].get("reply_markup"), asks[name]
    assert asks["first"]["message_id"] != asks["second"]["message_id"]

    for name, other in (("second", "first"), ("first", None)):
        ledger.close_request(1, actor="owner", result_summary="decline", db=str(dbs[name]))
        await _drain(dbs[name], door, batch_max)
        message_id = asks[name]["message_id"]
        wait_until_sync(
            lambda message_id=message_id: not current(door, message_id).get("reply_markup"),
            timeout_s=15,
            what=f"the {name} ledger's settle to take its ask's buttons off",
        )
        edited = current(door, message_id)
        tag = f"{name}-{batch_max}"
        assert edited["text"] == (
            f"{asks[name]['text']}\n\nrequest #1 closed by owner: order the bigger bag {tag}?"
            "\ndecline"
        )
        assert len(edited["edits"]) == 1
        if other is not None:  # the other ledger's ask is untouched, its buttons live
            untouched = current(door, asks[other]["message_id"])
            assert untouched["text"] == asks[other]["text"]
            assert untouched["edits"] == []
            assert untouched.get("reply_markup") == asks[other]["reply_markup"]


def current(door: LiveDoor, message_id: int) -> dict[str, Any]:
    (message,) = [m for m in door.emulator.messages if m["message_id"] == message_id]
    return message
