"""The Bot API's shapes and checks, as the emulator answers them: parameters read from a form or
JSON body, a reply markup and its buttons, bot commands, and the JSON of a chat, a user and a
message as python-telegram-bot's `Update.de_json` reads them. A refused parameter raises
`Refusal` with the status and description Telegram answers."""

from __future__ import annotations

import json
import re
import time
from typing import Any

MAX_MESSAGE_UTF16_UNITS = 4096  # the Bot API's own limit for sendMessage text, in UTF-16 units
MAX_CALLBACK_DATA_BYTES = 64
MAX_CALLBACK_ANSWER_CHARS = 200
MAX_COMMANDS = 100
MAX_COMMAND_DESCRIPTION_CHARS = 256
COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
BOT_COMMAND = re.compile(r"/[A-Za-z0-9_]{1,32}(@[A-Za-z0-9_]+)?")
BOT_USER: dict[str, Any] = {
    "id": 4242424242,
    "is_bot": True,
    "first_name": "Coop Emulator",
    "username": "coop_emulator_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
BAD_MARKUP = "Bad Request: can't parse reply keyboard markup JSON object"


class Refusal(Exception):
    """A call the Bot API refuses: `status`, Telegram's `description` and, for flood control,
    `retry_after_s`. Answered as the Bot API's JSON; never raised past the emulator."""

    def __init__(
        self,
        description: str,
        status: int = 400,
        *,
        retry_after_s: int | None = None,
        parameters: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after_s = retry_after_s
        #: the Bot API's ResponseParameters (`migrate_to_chat_id`, `retry_after`)
        self.parameters = dict(parameters or {})
        if retry_after_s is not None:
            self.parameters["retry_after"] = retry_after_s


def json_param(value: Any, name: str) -> Any:
    """A structured parameter: JSON text in a form body (what PTB sends), or already decoded
    from a JSON body."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise Refusal(f"Bad Request: can't parse {name} JSON object") from exc


def int_param(params: dict[str, Any], name: str, *, required: bool = True) -> int | None:
    """An integer parameter (`"12"` from a form, 12 from JSON); None when absent and optional."""
    value = params.get(name)
    if value is None or value == "":
        if required:
            raise Refusal(f"Bad Request: {name} is empty")
        return None
    if isinstance(value, bool):
        raise Refusal(f"Bad Request: {name} must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise Refusal(f"Bad Request: {name} must be an integer") from exc


def flag_param(params: dict[str, Any], name: str) -> bool:
    return str(params.get(name, "")).lower() in {"true", "1"}


def checked_text(value: Any) -> str:
    """A message text as sendMessage and editMessageText check it."""
    if not isinstance(value, str) or not value.strip():
        raise Refusal("Bad Request: message text is empty")
    if len(value.encode("utf-16-le")) // 2 > MAX_MESSAGE_UTF16_UNITS:
        raise Refusal("Bad Request: message is too long")
    return value


def reply_markup(value: Any) -> dict[str, Any] | None:
    """A `reply_markup` parameter, checked; an inline keyboard without a button is None (it
    removes the keyboard, as in Telegram). Other keyboards are kept as given."""
    if value is None or value == "":
        return None
    markup = json_param(value, "reply keyboard markup")
    if not isinstance(markup, dict):
        raise Refusal(BAD_MARKUP)
    if "inline_keyboard" not in markup:
        return markup
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise Refusal(BAD_MARKUP)
    for button in (button for row in rows for button in row):
        _check_button(button)
    if not any(rows):
        return None
    return {"inline_keyboard": rows}


def _check_button(button: Any) -> None:
    if not isinstance(button, dict) or not isinstance(button.get("text"), str):
        raise Refusal("Bad Request: can't parse inline keyboard button: Text must be a string")
    if not button["text"].strip():
        raise Refusal("Bad Request: BUTTON_TEXT_INVALID")
    if "url" in button:
        return
    data = button.get("callback_data")
    if data is None:
        raise Refusal("Bad Request: text buttons are unallowed in the inline keyboard")
    if not isinstance(data, str) or not 1 <= len(data.encode()) <= MAX_CALLBACK_DATA_BYTES:
        raise Refusal("Bad Request: BUTTON_DATA_INVALID")


def buttons(markup: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The inline buttons of `markup`, row by row, left to right."""
    if markup is None:
        return []
    return [button for row in markup.get("inline_keyboard", []) for button in row]


def commands(value: Any) -> list[dict[str, str]]:
    """setMyCommands' `commands`: 1..100 of `{"command": [a-z0-9_]{1,32}, "description":
    1..256 characters}`."""
    if value is None or value == "":
        raise Refusal('Bad Request: parameter "commands" is required')
    listed = json_param(value, "commands")
    if not isinstance(listed, list) or not listed:
        raise Refusal("Bad Request: commands must be a non-empty array")
    if len(listed) > MAX_COMMANDS:
        raise Refusal("Bad Request: BOT_COMMANDS_TOO_MUCH")
    checked = []
    for item in listed:
        if not isinstance(item, dict):
            raise Refusal("Bad Request: can't parse BotCommand")
        name, description = item.get("command"), item.get("description")
        if not isinstance(name, str) or not COMMAND_NAME.fullmatch(name):
            raise Refusal("Bad Request: BOT_COMMAND_INVALID")
        if (
            not isinstance(description, str)
            or not description.strip()
            or len(description) > MAX_COMMAND_DESCRIPTION_CHARS
        ):
            raise Refusal("Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        checked.append({"command": name, "description": description})
    return checked


def command_entities(text: str) -> list[dict[str, Any]]:
    """A `bot_command` entity for a leading `/command` (or `/command@bot`), as Telegram marks it
    (offset and length in UTF-16 units; a command is ASCII)."""
    match = BOT_COMMAND.match(text)
    if match is None:
        return []
    return [{"type": "bot_command", "offset": 0, "length": match.end()}]


def user_json(user_id: int, username: str | None, first_name: str | None) -> dict[str, Any]:
    user: dict[str, Any] = {
        "id": user_id,
        "is_bot": False,
        "first_name": first_name or f"User {user_id}",
    }
    if username:
        user["username"] = username
    return user


def chat_json(chat_id: int | str, user: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chat `chat_id` names: a private chat for a positive id (its user's names when
    known), a group for a negative one, a channel for an @name."""
    text = str(chat_id).strip()
    if not text.lstrip("-").isdigit():
        return {"id": -1001234567890, "type": "channel", "title": text, "username": text[1:]}
    number = int(text)
    if number < 0:
        return {"id": number, "type": "group", "title": "Coop group"}
    if user is not None and user["id"] == number:
        chat = {"id": number, "type": "private", "first_name": user["first_name"]}
        if "username" in user:
            chat["username"] = user["username"]
        return chat
    return {"id": number, "type": "private", "first_name": "Owner"}


def chat_id_of(value: Any) -> int | str:
    """A chat id as the record keeps it: an int for a numeric id, else the @name."""
    text = str(value).strip()
    return int(text) if text.lstrip("-").isdigit() else text


def message_json(record: dict[str, Any], replied: dict[str, Any] | None = None) -> dict[str, Any]:
    """A kept message (the bot's or a user's) as the Bot API's Message; `replied` is the message
    it answers, included as `reply_to_message` (one level, as Telegram nests it)."""
    if "from" in record:  # a user's message, kept in the API's shape
        message = {key: value for key, value in record.items() if key != "reply_to_message_id"}
    else:
        message = {
            "message_id": record["message_id"],
            "from": BOT_USER,
            "chat": chat_json(record["chat_id"]),
            "date": int(record["received_at"]),
            "text": record["text"],
        }
        if record["reply_markup"] is not None:
            message["reply_markup"] = record["reply_markup"]
        if record["edits"]:
            message["edit_date"] = int(record["edits"][-1]["edited_at"])
    if replied is not None:
        message["reply_to_message"] = message_json(replied)
    return message


def now_s() -> int:
    return int(time.time())
