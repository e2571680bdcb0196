"""Asks through the real door (uvicorn, a real chief.db, python-telegram-bot) to the Bot API
emulator: a notify with `ask` rings alone with one button per choice while the rows around it
digest; the buttons' callback data are opaque tokens; `ring: false` lands a line and rings
nothing; a settle voids the buttons and edits the ask message (once); a settle that comes
before its ask rang leaves no button anywhere; an ask in doubt rings again alone, marked, with
the same buttons; `reask` rings a request again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from chief.phone.pacing import REPEAT_MARKER
from tests.support.door import CHAT_ID, DoorStack, body, door_stack
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

TOKEN = re.compile(r"^b-[A-Za-z0-9_-]{22}$")
CHOICES = {2: ["approve", "decline"], 4: ["small bag", "big bag", "Later", "no"]}


def ask_text(request_id: int, choices: list[str]) -> str:
    shown = f" ({' / '.join(choices)})" if choices else ""
    return f"request #{request_id} from agent: order the bigger bag?{shown}"


def key(request_id: int) -> str:
    """The ask key the ledger would have drawn for the request (any `q-` + 32 hex will do)."""
    return f"q-{request_id:032x}"


def ask(outbox_id: str, request_id: int, choices: list[str]) -> dict[str, Any]:
    document: dict[str, Any] = body(outbox_id, text=ask_text(request_id, choices))
    document["kind"] = "request.added"
    document["ask"] = {
        "request_id": request_id,
        "key": key(request_id),
        "title": "order the bigger bag?",
    }
    if choices:
        document["ask"]["choices"] = choices
    return document


def settle(outbox_id: str, request_id: int, text: str = "", **extra: object) -> dict[str, Any]:
    line = text or f"request #{request_id} closed by owner: decline"
    settles = {"request_id": request_id, "key": key(request_id)}
    return body(outbox_id, text=line) | {"kind": "request.closed", "settles": settles} | extra


def buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, callback_data) of a kept message's inline keyboard as it is now, in order."""
    markup = message.get("reply_markup") or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [
        (button["text"], button["callback_data"])
        for row in markup.get("inline_keyboard", [])
        for button in row
    ]


def message_with(stack: DoorStack, text: str) -> dict[str, Any]:
    [message] = [m for m in stack.emulator.messages if m["text"].startswith(text)]
    return message


async def rung(stack: DoorStack, count: int) -> None:
    async def done() -> bool:
        assert stack.chief is not None
        status = await stack.chief.telegram_status()
        return status.depth == 0 and len(stack.emulator.messages) >= count

    await wait_until(done, timeout_s=20, what=f"{count} Telegram messages, the queue empty")


@pytest.mark.parametrize("count", [2, 4])
async def test_an_ask_rings_alone_with_its_buttons_while_the_rows_around_it_digest(
    tmp_path: Path, count: int
) -> None:
    choices = CHOICES[count]
    # Telegram refuses the first send once: the rows pile up behind it and digest.
    faults = [{"mode": "429", "retry_after": 1, "count": 1}]
    async with door_stack(tmp_path, faults=faults) as stack:
        assert stack.chief is not None
        for document in (
            body("a", text="todo #1 done: a"),
            body("b", text="todo #2 done: b"),
            ask("ask", 7, choices),
            body("c", text="todo #3 done: c"),
            body("d", text="todo #4 done: d"),
        ):
            response = await stack.notify(document)
            assert response.status_code == 200, response.text
            assert response.json()["delivered"] is True
        await rung(stack, 3)
        assert stack.emulator.texts() == [
            "2 updates\n\ntodo #1 done: a\n\ntodo #2 done: b",
            ask_text(7, choices),
            "2 updates\n\ntodo #3 done: c\n\ntodo #4 done: d",
        ]
        first, asked, last = stack.emulator.messages
        assert buttons(first) == buttons(last) == []
        shown = buttons(asked)
        assert [label for label, _ in shown] == choices
        for label, data in shown:
            assert TOKEN.match(data), data
            assert 1 <= len(data.encode()) <= 64
            assert await stack.chief.store.ask_button(data) == (key(7), 7, label, False)
        assert len({data for _, data in shown}) == count
        remembered = await stack.chief.store.ask_by_message(int(CHAT_ID), asked["message_id"])
        assert remembered == (key(7), 7, choices, False)
        assert await stack.chief.store.ask_by_message(int(CHAT_ID), first["message_id"]) is None


async def test_button_tokens_are_opaque_and_differ_between_requests(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        for request_id in (5, 6):
            response = await stack.notify(ask(f"ask-{request_id}", request_id, CHOICES[2]))
            assert response.status_code == 200, response.text
        await rung(stack, 2)
        five, six = (buttons(message) for message in stack.emulator.messages)
        assert [label for label, _ in five] == [label for label, _ in six] == CHOICES[2]
        tokens = [data for _, data in five + six]
        assert len(set(tokens)) == 4
        for data in tokens:
            # Nothing in the data names the request, the choice or a command.
            assert TOKEN.match(data), data
            assert not any(word in data for word in ("approve", "decline", "/"))


async def test_an_ask_without_choices_rings_alone_and_is_remembered(tmp_path: Path) -> None:
    faults = [{"mode": "429", "retry_after": 1, "count": 1}]
    async with door_stack(tmp_path, faults=faults) as stack:
        assert stack.chief is not None
        for document in (
            body("a", text="todo #1 done: a"),
            ask("ask", 9, []),
            body("b", text="todo #2 done: b"),
            body("c", text="todo #3 done: c"),
        ):
            assert (await stack.notify(document)).status_code == 200
        await rung(stack, 3)
        assert stack.emulator.texts() == [
            "todo #1 done: a",
            ask_text(9, []),
            "2 updates\n\ntodo #2 done: b\n\ntodo #3 done: c",
        ]
        asked = stack.emulator.messages[1]
        assert buttons(asked) == []
        remembered = await stack.chief.store.ask_by_message(int(CHAT_ID), asked["message_id"])
        assert remembered == (key(9), 9, [], False)


async def test_ring_false_lands_the_chief_line_and_rings_nothing(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        quiet = settle("own-answer", 3, "request #3 closed by owner from Telegram: approve")
        for _ in range(2):  # a retry of the row too
            response = await stack.notify(quiet | {"ring": False})
            assert response.status_code == 200, response.text
            assert response.json()["telegram"] == "not_rung"
            assert response.json()["delivered"] is True
        assert await stack.chief_lines("own-answer") == 1
        after = await stack.notify(body("after", text="todo #4 done: after"))
        assert after.json()["telegram"] == "sent"
        assert stack.emulator.texts() == ["todo #4 done: after"]


async def test_a_settle_edits_the_ask_message_and_removes_its_buttons(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        await stack.notify(ask("ask", 7, CHOICES[2]))
        await rung(stack, 1)
        tokens = [data for _, data in buttons(stack.emulator.messages[0])]
        closed = "request #7 closed by owner at a terminal: decline"
        response = await stack.notify(settle("settle", 7, closed))
        assert response.status_code == 200, response.text
        expected = ask_text(7, CHOICES[2]) + "\n\n" + closed

        def edited() -> bool:
            return message_with(stack, ask_text(7, CHOICES[2]))["text"] == expected

        await wait_until(edited, timeout_s=10, what="the ask message edited")
        message = message_with(stack, expected)
        assert message["reply_markup"] is None  # the keyboard removed, not left empty
        assert len(message["edits"]) == 1
        for token in tokens:
            button = await stack.chief.store.ask_button(token)
            assert button is not None
            assert button[3] is True
        assert stack.emulator.texts()[-1] == closed  # the settle's own line rang too


async def test_a_settle_twice_is_one_edit(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        await stack.notify(ask("ask", 7, CHOICES[2]))
        await rung(stack, 1)
        await stack.notify(settle("settle", 7))
        await stack.notify(settle("settle", 7))  # the same row again (a lost answer)
        await stack.notify(settle("abandon", 7, "request #7 abandoned"))  # a second settle
        await rung(stack, 3)
        assert stack.service.asks is not None
        await wait_until(
            lambda: stack.service.asks is not None and stack.service.asks.edits_done >= 1,
            timeout_s=10,
            what="the edit",
        )
        [asked] = [m for m in stack.emulator.messages if m["text"].startswith("request #7 from")]
        assert len(asked["edits"]) == 1
        assert stack.service.asks.edits_done == 1


async def test_a_settle_in_the_asks_own_batch_leaves_no_button_anywhere(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        document = {"items": [ask("ask", 7, CHOICES[2]), settle("settle", 7)]}
        response = await stack.notify_batch(document)
        assert response.status_code == 200, response.text
        answers = response.json()["items"]
        assert answers[0]["telegram"] == "not_rung"
        assert await stack.chief_lines("ask") == await stack.chief_lines("settle") == 1
        await rung(stack, 1)
        assert stack.emulator.texts() == ["request #7 closed by owner: decline"]
        assert all(buttons(message) == [] for message in stack.emulator.messages)
        # A retry of the ask row does not bring it back.
        again = await stack.notify(ask("ask", 7, CHOICES[2]))
        assert again.json()["telegram"] == "not_rung"
        assert await stack.chief.store.messages_of_ask(key(7)) == []


async def test_a_settle_before_a_deferred_ask_rang_means_it_never_rings(tmp_path: Path) -> None:
    faults = [{"mode": "429", "retry_after": 1, "count": 1}]
    async with door_stack(tmp_path, faults=faults) as stack:
        assert stack.chief is not None
        first = await stack.notify(ask("ask", 7, CHOICES[2]))
        assert first.json()["telegram"] == "queued"  # Telegram refused it once: deferred
        await stack.notify(settle("settle", 7))
        await rung(stack, 1)
        assert stack.emulator.texts() == ["request #7 closed by owner: decline"]
        assert all(buttons(message) == [] for message in stack.emulator.messages)
        assert await stack.chief.store.messages_of_ask(key(7)) == []


async def test_reask_rings_the_request_again_with_its_live_buttons(tmp_path: Path) -> None:
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        assert stack.service.asks is not None
        await stack.notify(ask("ask", 7, CHOICES[2]))
        await rung(stack, 1)
        request = {
            "id": 7,
            "ask_key": key(7),
            "title": "order the bigger bag?",
            "choices": CHOICES[2],
        }
        await stack.service.asks.reask(request)
        # A request this chief.db never saw (a fresh chief.db): its buttons are minted now.
        await stack.service.asks.reask(
            {"id": 8, "ask_key": key(8), "title": "walk the dog?", "choices": None}
        )
        await stack.service.asks.reask(
            {"id": 9, "ask_key": key(9), "title": "which bag?", "choices": ["s", "m"]}
        )
        await rung(stack, 4)
        old, again, eight, nine = stack.emulator.messages
        assert again["text"] == "request #7: order the bigger bag? (approve / decline)"
        assert buttons(again) == buttons(old)  # the same live tokens
        messages = await stack.chief.store.messages_of_ask(key(7))
        assert [m.message_id for m in messages] == [old["message_id"], again["message_id"]]
        for message in (old, again):
            remembered = await stack.chief.store.ask_by_message(int(CHAT_ID), message["message_id"])
            assert remembered == (key(7), 7, CHOICES[2], False)
        assert (eight["text"], buttons(eight)) == ("request #8: walk the dog?", [])
        assert [label for label, _ in buttons(nine)] == ["s", "m"]
        token = buttons(nine)[1][1]
        assert await stack.chief.store.ask_button(token) == (key(9), 9, "m", False)
        # Settled, every message that rang it is edited.
        await stack.notify(settle("settle", 7))
        await wait_until(
            lambda: all(
                buttons(m) == []
                for m in stack.emulator.messages
                if m["text"].startswith("request #7")
            ),
            timeout_s=10,
            what="both ask messages of #7 edited",
        )


async def test_an_ask_in_doubt_rings_again_alone_marked_with_the_same_buttons(
    tmp_path: Path,
) -> None:
    # Telegram keeps the ask and answers past the late-reply bound (6 x 0.3 s): in doubt.
    faults = [{"mode": "delay", "count": 1, "delay_s": 3, "methods": ["sendMessage"]}]
    settings = {"TELEGRAM_TIMEOUT_S": "0.3"}
    async with door_stack(tmp_path, faults=faults, settings=settings) as stack:
        assert stack.chief is not None
        await stack.notify(ask("ask", 7, CHOICES[2]))
        await stack.notify(body("after", text="todo #4 done: after"))
        await rung(stack, 3)
        first, repeat, after = stack.emulator.messages
        assert first["text"] == ask_text(7, CHOICES[2])
        assert repeat["text"] == REPEAT_MARKER + ask_text(7, CHOICES[2])  # alone, marked
        assert after["text"] == "todo #4 done: after"
        assert buttons(repeat) == buttons(first) != []
        remembered = await stack.chief.store.ask_by_message(int(CHAT_ID), repeat["message_id"])
        assert remembered == (key(7), 7, CHOICES[2], False)
