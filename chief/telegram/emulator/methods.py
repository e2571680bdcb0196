"""The Bot API methods the emulator answers, each checked as Telegram checks it: `getMe`,
`sendMessage`, `getUpdates` (long polling), `answerCallbackQuery`, `editMessageText`,
`editMessageReplyMarkup`, `setMyCommands`, `getMyCommands`, `setWebhook`, `deleteWebhook`,
`getWebhookInfo`, and the harmless `close`, `logOut`, `deleteMyCommands`. A method returns its
`result` or raises `Refusal`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import structlog
from starlette.requests import Request

from chief.telegram.emulator import shapes
from chief.telegram.emulator.shapes import Refusal
from chief.telegram.emulator.state import WEBHOOK_CONFLICT, EmulatorState

log = structlog.get_logger("chief.telegram.emulator")

MAX_UPDATES_LIMIT = 100
MAX_POLL_TIMEOUT_S = 50  # Telegram holds a long poll at most about this long
CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)
QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"

Method = Callable[[dict[str, Any], Request], Awaitable[Any]]


class BotMethods:
    """The Bot API over one `EmulatorState`; `after_send` runs once a sendMessage's answer has
    gone out (the receipt line and its log event)."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.table: dict[str, Method] = {
            "getme": self.get_me,
            "close": self.harmless,
            "logout": self.harmless,
            "setwebhook": self.set_webhook,
            "deletewebhook": self.delete_webhook,
            "getwebhookinfo": self.get_webhook_info,
            "deletemycommands": self.delete_my_commands,
            "sendmessage": self.send_message,
            "getupdates": self.get_updates,
            "answercallbackquery": self.answer_callback_query,
            "editmessagetext": self.edit_message_text,
            "editmessagereplymarkup": self.edit_message_reply_markup,
            "setmycommands": self.set_my_commands,
            "getmycommands": self.get_my_commands,
        }

    async def get_me(self, _: dict[str, Any], __: Request) -> Any:
        return shapes.BOT_USER

    async def harmless(self, _: dict[str, Any], __: Request) -> Any:
        return True

    async def set_webhook(self, params: dict[str, Any], _: Request) -> Any:
        """Updates go to `url` from now on: getUpdates is refused 409 until deleteWebhook (the
        emulator never calls the webhook; an empty url removes it, as in the Bot API)."""
        url = str(params.get("url") or "").strip()
        self.state.webhook_url = url or None
        return True

    async def delete_webhook(self, _: dict[str, Any], __: Request) -> Any:
        self.state.webhook_url = None
        return True

    async def get_webhook_info(self, _: dict[str, Any], __: Request) -> Any:
        pending = len(self.state.updates.pending_ids()) if self.state.webhook_url else 0
        return {
            "url": self.state.webhook_url or "",
            "has_custom_certificate": False,
            "pending_update_count": pending,
        }

    async def send_message(self, params: dict[str, Any], _: Request) -> Any:
        """Check it as the Bot API does, apply the flood limits, keep the message with its
        keyboard and the message it replies to."""
        state = self.state
        if not str(params.get("chat_id", "")).strip():
            raise Refusal("Bad Request: chat_id is empty")
        text = shapes.checked_text(params.get("text"))
        markup = shapes.reply_markup(params.get("reply_markup"))
        chat_id = shapes.chat_id_of(params["chat_id"])
        state.writable(chat_id)
        replied = self._replied(chat_id, params)
        if state.flood is not None:
            retry_after = state.flood.admit(params["chat_id"])
            if retry_after is not None:
                state.too_many_requests += 1
                raise Refusal(
                    f"Too Many Requests: retry after {retry_after}",
                    status=429,
                    retry_after_s=retry_after,
                )
        record = state.keep(
            chat_id,
            text,
            disable_notification=shapes.flag_param(params, "disable_notification"),
            reply_markup=markup,
            reply_to_message_id=None if replied is None else replied["message_id"],
        )
        return shapes.message_json(record, replied)

    def _replied(self, chat_id: int | str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The message a sendMessage replies to (`reply_to_message_id` or `reply_parameters`);
        a missing one is refused unless `allow_sending_without_reply`."""
        reply_id = shapes.int_param(params, "reply_to_message_id", required=False)
        allow_missing = shapes.flag_param(params, "allow_sending_without_reply")
        raw = params.get("reply_parameters")
        if raw not in (None, ""):
            parameters = shapes.json_param(raw, "reply parameters")
            if not isinstance(parameters, dict):
                raise Refusal("Bad Request: can't parse reply parameters JSON object")
            reply_id = shapes.int_param(parameters, "message_id")
            allow_missing = parameters.get("allow_sending_without_reply") is True
        if reply_id is None:
            return None
        replied = self.state.find(chat_id, reply_id)
        if replied is None and not allow_missing:
            raise Refusal("Bad Request: message to be replied not found")
        return replied

    async def get_updates(self, params: dict[str, Any], request: Request) -> Any:
        """Confirm below `offset`, answer at once when updates wait, else long-poll until one
        arrives, the timeout passes or the caller hangs up. A second poll while one waits is
        refused 409, as Telegram refuses two readers."""
        queue = self.state.updates
        offset = shapes.int_param(params, "offset", required=False)
        limit = shapes.int_param(params, "limit", required=False) or MAX_UPDATES_LIMIT
        timeout_s = shapes.int_param(params, "timeout", required=False) or 0
        allowed = _allowed_updates(params.get("allowed_updates"))
        if self.state.webhook_url is not None:
            raise Refusal(WEBHOOK_CONFLICT, status=409)
        if queue.polling:
            raise Refusal(CONFLICT, status=409)
        queue.confirm(offset)
        queue.allow(allowed)
        if not queue.ready() and timeout_s > 0:
            queue.polling = True
            try:
                await _wait_or_hang_up(queue.wait(min(timeout_s, MAX_POLL_TIMEOUT_S)), request)
            finally:
                queue.polling = False
            queue.allow(None)
        return queue.take(max(1, min(limit, MAX_UPDATES_LIMIT)))

    async def answer_callback_query(self, params: dict[str, Any], _: Request) -> Any:
        query_id = str(params.get("callback_query_id", ""))
        text = params.get("text") or ""
        if not isinstance(text, str) or len(text) > shapes.MAX_CALLBACK_ANSWER_CHARS:
            raise Refusal("Bad Request: MESSAGE_TOO_LONG")
        if self.state.callback_queries.get(query_id, True):  # unknown, or answered already
            raise Refusal(QUERY_INVALID)
        self.state.callback_queries[query_id] = True
        self.state.callback_answers.append(
            {
                "callback_query_id": query_id,
                "text": text,
                "show_alert": shapes.flag_param(params, "show_alert"),
                "at": time.time(),
            }
        )
        return True

    async def edit_message_text(self, params: dict[str, Any], _: Request) -> Any:
        record = self._editable(params)
        text = shapes.checked_text(params.get("text"))
        # As in Telegram, an edit without reply_markup removes the inline keyboard.
        return self._edit(record, text, shapes.reply_markup(params.get("reply_markup")))

    async def edit_message_reply_markup(self, params: dict[str, Any], _: Request) -> Any:
        record = self._editable(params)
        return self._edit(record, record["text"], shapes.reply_markup(params.get("reply_markup")))

    def _editable(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("inline_message_id"):
            raise Refusal("Bad Request: message to edit not found")
        chat_id = params.get("chat_id")
        if chat_id is None or not str(chat_id).strip():
            raise Refusal("Bad Request: chat_id is empty")
        message_id = shapes.int_param(params, "message_id")
        assert message_id is not None
        self.state.writable(shapes.chat_id_of(chat_id))
        record = self.state.find(shapes.chat_id_of(chat_id), message_id)
        if record is None:
            raise Refusal("Bad Request: message to edit not found")
        if not self.state.is_bot_message(record):
            raise Refusal("Bad Request: message can't be edited")
        return record

    def _edit(self, record: dict[str, Any], text: str, markup: dict[str, Any] | None) -> Any:
        if record["text"] == text and record["reply_markup"] == markup:
            raise Refusal(shapes.NOT_MODIFIED)
        record["edits"].append(
            {
                "text": record["text"],
                "reply_markup": record["reply_markup"],
                "edited_at": time.time(),
            }
        )
        record["text"], record["reply_markup"] = text, markup
        log.info(
            "emulator.edited", telegram_message_id=record["message_id"], chat_id=record["chat_id"]
        )
        return shapes.message_json(record)

    async def set_my_commands(self, params: dict[str, Any], _: Request) -> Any:
        self.state.commands = shapes.commands(params.get("commands"))
        return True

    async def get_my_commands(self, _: dict[str, Any], __: Request) -> Any:
        return self.state.commands

    async def delete_my_commands(self, _: dict[str, Any], __: Request) -> Any:
        self.state.commands = []
        return True


def _allowed_updates(value: Any) -> frozenset[str] | None:
    if value is None or value == "":
        return None
    kinds = shapes.json_param(value, "allowed_updates")
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        raise Refusal("Bad Request: can't parse allowed_updates JSON array")
    return frozenset(kinds)


async def _wait_or_hang_up(waiting: Awaitable[None], request: Request) -> None:
    """Await `waiting`, or stop early when the caller hangs up (a client that gave up on its
    poll must not keep the poller's place, or its next poll would be refused 409)."""
    async with anyio.create_task_group() as tasks:

        async def hang_up() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        tasks.start_soon(hang_up)
        await waiting
        tasks.cancel_scope.cancel()
