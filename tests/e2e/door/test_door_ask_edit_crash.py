"""A `chief serve` process SIGKILLed after a settle committed and before the edit it owes: the
edit is durable in chief.db, and the next start performs it (the ask message edited once, its
buttons gone)."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.door.conftest import Harness, spawn_door
from tests.support.door import body, key_headers
from tests.support.procs import socket_client
from tests.support.waiting import wait_until_sync

KEY = "q-" + "7" * 32  # the ask key the ledger drew for request #7
pytestmark = pytest.mark.timeout(120)

ASKED = "request #7 from agent: order the bigger bag? (approve / decline)"
SETTLED = "request #7 closed by owner at a terminal: decline"


def the_ask(harness: Harness) -> dict[str, object]:
    [message] = [m for m in harness.emulator.messages if str(m["text"]).startswith(ASKED)]
    return message


def test_a_door_killed_between_a_settle_and_its_edit_edits_after_restart(
    harness: Harness,
) -> None:
    hold = harness.folder / "hold-edit"
    hold.touch()
    door = spawn_door(harness.env(COOP_TEST_FAULTS=f"door.before_ask_edit:pause-while={hold}"))
    ask = body("ask", text=ASKED) | {
        "kind": "request.added",
        "ask": {"request_id": 7, "key": KEY, "title": "order?", "choices": ["approve", "decline"]},
    }
    assert harness.notify(door, ask).status_code == 200
    wait_until_sync(lambda: harness.sent_marks("ask") == 1, timeout_s=15, what="the ask rung")
    assert the_ask(harness)["reply_markup"] is not None  # its buttons
    settle = body("settle", text=SETTLED) | {
        "kind": "request.closed",
        "settles": {"request_id": 7, "key": KEY},
    }
    # The crash point holds the door's whole event loop, so the settle's answer may or may not
    # get out before it: the settle's commit comes before the edit is attempted either way.
    try:
        with socket_client(door.socket_path, timeout_s=3) as client:
            answer = client.post("/api/coop/engine/notify", json=settle, headers=key_headers())
        assert answer.status_code == 200, answer.text
    except httpx.TimeoutException:
        pass
    reached = hold.with_name(hold.name + ".reached")
    wait_until_sync(reached.exists, timeout_s=15, what="the door at the edit")
    door.kill()  # SIGKILL: the settle is committed, its edit not made
    assert harness.chief_lines("settle") == 1
    assert harness._scalar("SELECT COUNT(*) FROM ask_edits") == 1
    assert the_ask(harness)["text"] == ASKED
    assert the_ask(harness)["edits"] == []

    door = spawn_door(harness.env())
    wait_until_sync(
        lambda: the_ask(harness)["text"] == ASKED + "\n\n" + SETTLED,
        timeout_s=15,
        what="the edit after the restart",
    )
    message = the_ask(harness)
    assert message["reply_markup"] is None
    assert len(message["edits"]) == 1  # type: ignore[arg-type]
    wait_until_sync(
        lambda: harness._scalar("SELECT COUNT(*) FROM ask_edits") == 0,
        timeout_s=10,
        what="the edit off the queue",
    )
    assert harness.chief_lines("settle") == 1
    assert door.terminate() == 0
    hold.unlink()
