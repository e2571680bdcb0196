"""An amendment of a decided ask (issue 34, item 1) through the real door (uvicorn, a real
chief.db, python-telegram-bot) to the Bot API emulator: a row with `amends` lands its Chief
line, rings nothing new, and edits the message that rang the ask to show the amendment under
the close it amends; the same row again (a lost answer) edits nothing more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.door.test_door_asks import (
    CHOICES,
    ask,
    ask_text,
    key,
    message_with,
    rung,
    settle,
)
from tests.support.door import body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

CLOSED = "request #7 closed by owner at a terminal: approve"
AMENDED = 'request #7 "order the bigger bag?" amended by owner: summary "approve" → "decline"'


def amend(outbox_id: str, request_id: int, text: str) -> dict[str, Any]:
    amends = {"request_id": request_id, "key": key(request_id)}
    return body(outbox_id, text=text) | {
        "kind": "request_amended",
        "amends": amends,
        "ring": False,
    }


async def test_an_amendment_edits_the_decided_message_and_rings_nothing(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        assert stack.service.asks is not None
        await stack.notify(ask("ask", 7, CHOICES[2]))
        await rung(stack, 1)
        await stack.notify(settle("settle", 7, CLOSED))
        await rung(stack, 2)
        settled = ask_text(7, CHOICES[2]) + "\n\n" + CLOSED
        await wait_until(
            lambda: message_with(stack, ask_text(7, CHOICES[2]))["text"] == settled,
            timeout_s=10,
            what="the settle's edit",
        )
        response = await stack.notify(amend("amend", 7, AMENDED))
        assert response.status_code == 200, response.text
        assert response.json()["telegram"] == "not_rung"
        amended = settled + "\n" + AMENDED
        await wait_until(
            lambda: message_with(stack, ask_text(7, CHOICES[2]))["text"] == amended,
            timeout_s=10,
            what="the amendment's edit",
        )
        assert await stack.chief_lines("amend") == 1
        again = await stack.notify(amend("amend", 7, AMENDED))  # a lost answer, sent again
        assert again.status_code == 200, again.text
        edits = stack.service.asks.edits_done
        await stack.notify(body("after", text="todo #4 done: after"))
        await rung(stack, 3)
        assert stack.service.asks.edits_done == edits
        message = message_with(stack, ask_text(7, CHOICES[2]))
        assert (message["text"], len(message["edits"])) == (amended, 2)
        assert stack.emulator.texts() == [amended, CLOSED, "todo #4 done: after"]  # none new
