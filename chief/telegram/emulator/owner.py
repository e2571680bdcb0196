"""The emulator plays the owner (or anyone): a text sent as a given user in a given chat (a reply
when it names the message it answers), a press of a button on a bot message as it is now, and a
replay of an update already made. Each makes the update Telegram would make and wakes the long
poll. A press names its message, or takes the chat's newest bot message with that button (what
an operator at a terminal means by "press approve"). A request that cannot be played raises
`ValueError` with the reason, in one line."""

from __future__ import annotations

import itertools
from typing import Any

import structlog

from chief.telegram.emulator import shapes
from chief.telegram.emulator.state import EmulatorState

log = structlog.get_logger("chief.telegram.emulator")

_QUERY_IDS = itertools.count(1)


def _whole(document: dict[str, Any], name: str) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer")
    return value


def _optional_whole(document: dict[str, Any], name: str) -> int | None:
    return None if document.get(name) is None else _whole(document, name)


def _name(document: dict[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"{name} must be a non-empty string when given")
    return value


def text(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"chat_id", "user_id", "text", "reply_to_message_id"?, "username"?, "first_name"?}`:
    a message from that user in that chat (private when chat_id == user_id), with a
    `bot_command` entity for a leading `/command`."""
    chat_id, user_id = _whole(document, "chat_id"), _whole(document, "user_id")
    body = document.get("text")
    if not isinstance(body, str) or not body.strip():
        raise ValueError("text must be a non-empty string")
    try:
        shapes.checked_text(body)
    except shapes.Refusal as exc:
        raise ValueError(exc.description) from exc
    reply_id = _optional_whole(document, "reply_to_message_id")
    replied = None
    if reply_id is not None:
        replied = state.find(chat_id, reply_id)
        if replied is None:
            raise ValueError(f"chat {chat_id} has no message {reply_id} to reply to")
    user = shapes.user_json(user_id, _name(document, "username"), _name(document, "first_name"))
    message: dict[str, Any] = {
        "from": user,
        "chat": shapes.chat_json(chat_id, user),
        "date": shapes.now_s(),
        "text": body,
    }
    entities = shapes.command_entities(body)
    if entities:
        message["entities"] = entities
    message["reply_to_message_id"] = reply_id
    record = state.keep_owner(message)
    update = state.updates.add({"message": shapes.message_json(record, replied)})
    log.info("emulator.owner_text", chat_id=chat_id, user_id=user_id, update=update["update_id"])
    return {"update_id": update["update_id"], "message_id": record["message_id"]}


def block(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"chat_id", "user_id", "blocked": true | false}`: the user blocks (or unblocks) the bot
    in that chat, as Telegram tells the bot: every write to the chat refused `403 Forbidden: bot
    was blocked by the user` while blocked, and a `my_chat_member` update (the bot's status
    `kicked` or `member`, the old one the other)."""
    chat_id, user_id = _whole(document, "chat_id"), _whole(document, "user_id")
    blocked = document.get("blocked")
    if not isinstance(blocked, bool):
        raise ValueError("blocked must be true or false")
    if blocked:
        state.blocked.add(str(chat_id))
    else:
        state.blocked.discard(str(chat_id))
    old, new = ("member", "kicked") if blocked else ("kicked", "member")
    user = shapes.user_json(user_id, None, None)
    bot = {key: shapes.BOT_USER[key] for key in ("id", "is_bot", "first_name", "username")}
    changed = {
        "chat": shapes.chat_json(chat_id, user),
        "from": user,
        "date": shapes.now_s(),
        # A `kicked` member says until when: 0, for ever (until the user unblocks the bot).
        "old_chat_member": {"status": old, "user": bot} | ({} if blocked else {"until_date": 0}),
        "new_chat_member": {"status": new, "user": bot} | ({"until_date": 0} if blocked else {}),
    }
    update = state.updates.add({"my_chat_member": changed})
    log.info("emulator.owner_block", chat_id=chat_id, user_id=user_id, blocked=blocked)
    return {"update_id": update["update_id"]}


def press(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"chat_id", "user_id", "message_id"?, "text"? | "index"?}`: press a button (by label,
    or by its index counted row by row; the first button when neither is given) on a bot
    message as it is now: a callback query whose answer is awaited by answerCallbackQuery.
    Without `message_id`, the newest bot message in that chat that has such a button now."""
    chat_id, user_id = _whole(document, "chat_id"), _whole(document, "user_id")
    label, index = _name(document, "text"), _optional_whole(document, "index")
    if label is not None and index is not None:
        raise ValueError("give text or index, not both")
    record = _pressed_message(state, chat_id, _optional_whole(document, "message_id"), label, index)
    message_id = record["message_id"]
    button = _button(shapes.buttons(record["reply_markup"]), label, index)
    data = button.get("callback_data")
    if data is None:
        raise ValueError(f"the button {button['text']!r} carries no callback_data")
    query_id = f"{next(_QUERY_IDS)}{message_id:06d}"
    state.callback_queries[query_id] = False
    user = shapes.user_json(user_id, _name(document, "username"), _name(document, "first_name"))
    query = {
        "id": query_id,
        "from": user,
        "chat_instance": f"ci{chat_id}",
        "message": shapes.message_json(record),
        "data": data,
    }
    update = state.updates.add({"callback_query": query})
    log.info("emulator.owner_press", chat_id=chat_id, user_id=user_id, update=update["update_id"])
    return {"update_id": update["update_id"], "callback_query_id": query_id, "data": data}


def _pressed_message(
    state: EmulatorState, chat_id: int, message_id: int | None, label: str | None, index: int | None
) -> dict[str, Any]:
    """The bot message `message_id` names, or without one the chat's newest bot message that
    has the button asked for (by label, by index, or any button)."""
    if message_id is not None:
        record = state.find(chat_id, message_id)
        if record is None or not state.is_bot_message(record):
            raise ValueError(f"chat {chat_id} has no bot message {message_id}")
        return record
    for record in reversed(state.messages):
        if str(record["chat_id"]) != str(chat_id):
            continue
        buttons = shapes.buttons(record["reply_markup"])
        if label is not None and any(button["text"] == label for button in buttons):
            return record
        if label is None and len(buttons) > (index or 0):
            return record
    wanted = "" if index is None else f" at index {index}"
    if label is not None:
        wanted = f" {label!r}"
    raise ValueError(f"chat {chat_id} has no bot message with a button{wanted}")


def _button(buttons: list[dict[str, Any]], label: str | None, index: int | None) -> dict[str, Any]:
    if not buttons:
        raise ValueError("the message has no inline buttons (now)")
    if label is not None:
        for button in buttons:
            if button["text"] == label:
                return button
        raise ValueError(f"the message has no button {label!r}")
    index = index or 0
    if not 0 <= index < len(buttons):
        raise ValueError(f"index must be 0..{len(buttons) - 1}")
    return buttons[index]


def replay(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"update_id"}`: deliver that update again, the same object."""
    update_id = _whole(document, "update_id")
    update = state.updates.replay(update_id)
    if update is None:
        raise ValueError(f"no update {update_id} was made")
    return {"update_id": update_id}
