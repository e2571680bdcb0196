"""The Telegram inbound seam: what the phone asks of the Bot API besides sending a report.

    get_updates(offset, timeout_s)   long poll (getUpdates): the updates at or after `offset`,
                                     at once when some wait, else when one arrives or the poll
                                     times out (an empty list); each read on its own, so one
                                     PTB cannot read comes as an empty Update under its id
                                     (`read_updates`), which the door passes over
    reply(chat_id, text, buttons=, reply_to=)   sendMessage, with inline buttons; its message id
    answer_callback(query_id, text)  answerCallbackQuery: the toast of a tap
    set_commands(commands)           setMyCommands: the menu Telegram shows

`BotPhone` is the real one, on python-telegram-bot's public `Bot` pointed at `base_url` (the
real Bot API or the project's emulator), on the project's own request seam
(`chief.telegram.sender.TransportRequest`). It has two request objects, as PTB's `Bot` allows:
getUpdates has its own, whose read timeout covers the poll (PTB adds the poll's `timeout` to
that request object's read timeout), so a poll held open by Telegram is never taken for a lost
answer, and a poll never waits for a pooled connection behind a reply (or the other way round).

Every call goes through PTB's public generic call (`chief.telegram.sender.call_api`): Telegram's
`ok: true` is the call done, and only what the door needs of its result is read (a reply's
message id, None when it cannot be read; of a toast or the commands nothing).

Errors are translated where the sender translates them (`chief.telegram.sender.translate_error`,
the one place that knows PTB's error tree): every failure is a `TelegramUnavailable`, a
permanent refusal (a bad token) its `TelegramRefused`; whatever PTB raises on an answer it
cannot read (a getMe without `is_bot`, getUpdates' `result: null`) is a `TelegramUnavailable`
too; a 409 Conflict on getUpdates (another reader polls this bot: a second door, `chief
telegram pair`) is `TelegramConflict`. Every call
has one overall deadline: `timeout_s` (the door's `TELEGRAM_TIMEOUT_S`), plus the poll's own
timeout for getUpdates. A cancelled poll (the door stopping) ends at once: the transport drops
its connection, and the updates it would have brought stay unconfirmed at Telegram.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import anyio
import structlog
from telegram import (
    Bot,
    BotCommand,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    ReplyParameters,
    Update,
)
from telegram.error import Conflict, EndPointNotFound, InvalidToken, TelegramError

from chief.errors import TelegramConflict, TelegramUnavailable
from chief.telegram.sender import (
    TransportRequest,
    call_api,
    fit_for_telegram,
    sent_message_id,
    translate_error,
    unreadable_get_me,
)

#: rows of (label, callback_data): one inline button each
Buttons = Sequence[Sequence[tuple[str, str]]]

# Replies and toasts: a handful of connections is plenty for one owner's taps.
CONNECTION_POOL_SIZE = 4
# The kinds of update the door reads; anything else (edits, reactions, channel posts) is not
# asked for, so Telegram never wakes the poll for it.
ALLOWED_UPDATES = ("message", "callback_query", "my_chat_member")

T = TypeVar("T")
log = structlog.get_logger("chief.telegram")


class TelegramPhone(Protocol):
    """The inbound seam (see the module docstring)."""

    async def get_updates(self, offset: int | None, timeout_s: float) -> Sequence[Update]: ...
    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int | None: ...
    async def answer_callback(self, query_id: str, text: str) -> None: ...
    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None: ...


def markup(buttons: Buttons | None) -> InlineKeyboardMarkup | None:
    """PTB's inline keyboard for `buttons` (None or no rows: none)."""
    if not buttons:
        return None
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(text, callback_data=data) for text, data in row] for row in buttons]
    )


def read_updates(result: object, bot: Bot) -> list[Update]:
    """getUpdates' answer, read update by update: one python-telegram-bot cannot read (a shape
    it does not expect, as a Bot API newer than it may send) becomes an empty `Update` under
    its own id, logged, which the door passes over (no sender, no chat), so it never stops the
    poll at it. An answer that is not a list of updates with ids raises ValueError."""
    if not isinstance(result, list):
        raise ValueError("getUpdates answered something other than a list")
    found = []
    for item in result:
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(update_id, int) or isinstance(update_id, bool):
            raise ValueError("getUpdates answered an update without an update_id")
        try:
            update = Update.de_json(item, bot)
        except Exception as exc:  # whatever PTB raises on a shape it cannot read
            log.warning("telegram.update_unreadable", update_id=update_id, error=repr(exc)[:200])
            update = Update(update_id)
        found.append(update)
    return found


def conflict(method: str, exc: Conflict) -> TelegramConflict:
    """Telegram's 409 in words that fit its cause: a webhook set for the bot (Telegram delivers
    the updates there, so getUpdates is refused until deleteWebhook), or another reader."""
    if "webhook" in exc.message.lower():
        return TelegramConflict(
            f"Telegram refused {method}: a webhook is set for this bot ({exc.message}); the door "
            "reads the phone by polling: remove the webhook with the Bot API's deleteWebhook "
            "(https://api.telegram.org/bot<TELEGRAM_BOT_TOKEN>/deleteWebhook) unless another "
            "program should get the updates; the door polls again on its own"
        )
    return TelegramConflict(
        f"Telegram refused {method}: another reader polls this bot's updates ({exc.message});"
        " stop the other door or `chief telegram pair`"
    )


class BotPhone:
    """The real phone: python-telegram-bot's `Bot`, initialised once and kept open."""

    def __init__(self, token: str, *, base_url: str, timeout_s: float) -> None:
        request = TransportRequest(base_url, timeout_s=timeout_s, pool_size=CONNECTION_POOL_SIZE)
        # One connection, the poll's alone: its read timeout (timeout_s) plus the poll's timeout
        # is what PTB awaits the answer for.
        polling = TransportRequest(base_url, timeout_s=timeout_s, pool_size=1)
        os.environ.setdefault("PTB_TIMEDELTA", "true")  # as the sender: see BotSender
        self._bot = Bot(token, base_url=base_url, request=request, get_updates_request=polling)
        self._polling = polling
        self._timeout_s = timeout_s

    async def start(self) -> None:
        """Open the connection pools and call getMe (a failure raises TelegramUnavailable; the
        first call retries it)."""
        await self._call(self._bot.initialize, "getMe")

    async def aclose(self) -> None:
        # Nothing is left to tell Telegram; the pools are closed either way.
        with contextlib.suppress(TelegramError):
            await self._bot.shutdown()

    async def get_updates(self, offset: int | None, timeout_s: float) -> Sequence[Update]:
        poll_s = max(0, int(timeout_s))
        return await self._call(lambda: self._poll(offset, poll_s), "getUpdates", extra_s=poll_s)

    async def _poll(self, offset: int | None, poll_s: int) -> list[Update]:
        """getUpdates on the polling connection (its read timeout plus the poll's, as PTB's
        own get_updates waits), its answer read update by update (`read_updates`)."""
        parameters: dict[str, Any] = {"timeout": poll_s, "allowed_updates": list(ALLOWED_UPDATES)}
        if offset is not None:
            parameters["offset"] = offset
        try:
            # PTB's generic call, so each update is read on its own: PTB's get_updates reads the
            # whole answer at once (one update it cannot read would fail every poll).
            result = await call_api(
                self._bot,
                "getUpdates",
                parameters,
                read_timeout=(self._polling.read_timeout or 0.0) + poll_s,
            )
        except EndPointNotFound as exc:  # getUpdates exists: a 404 or 401 is the token's
            raise InvalidToken(exc.message) from exc
        return read_updates(result, self._bot)

    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int | None:
        """sendMessage; its message id, or None when Telegram took it and its id cannot be
        read (`chief.telegram.sender.sent_message_id`)."""
        parameters = {
            "chat_id": chat_id,
            "text": fit_for_telegram(text),
            "reply_markup": markup(buttons),
            "reply_parameters": None if reply_to is None else ReplyParameters(reply_to),
        }
        result = await self._call(
            lambda: call_api(self._bot, "sendMessage", parameters), "sendMessage"
        )
        return sent_message_id(result, "sendMessage")

    async def answer_callback(self, query_id: str, text: str) -> None:
        """answerCallbackQuery: done once Telegram took it, whatever its result holds."""
        parameters = {"callback_query_id": query_id, "text": text or None}
        await self._call(
            lambda: call_api(self._bot, "answerCallbackQuery", parameters), "answerCallbackQuery"
        )

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        """setMyCommands: done once Telegram took it, whatever its result holds."""
        parameters = {"commands": [BotCommand(name, text) for name, text in commands]}
        await self._call(lambda: call_api(self._bot, "setMyCommands", parameters), "setMyCommands")

    async def _call(
        self, call: Callable[[], Awaitable[T]], method: str, *, extra_s: float = 0.0
    ) -> T:
        """`call` under one deadline (getMe first, when the Bot is not initialised yet), its
        errors translated."""
        bound_s = self._timeout_s * 2 + extra_s  # getMe (when due) and the call itself
        with anyio.move_on_after(bound_s) as deadline:
            await self._initialize()
            try:
                return await call()
            except Conflict as exc:
                raise conflict(method, exc) from exc
            except TelegramError as exc:
                raise translate_error(exc) from exc
            except Exception as exc:  # whatever PTB raises on an answer it cannot read
                raise TelegramUnavailable(
                    f"Telegram answered {method} with nothing readable "
                    f"({type(exc).__name__}: {str(exc)[:120]}); retry later"
                ) from exc
        assert deadline.cancelled_caught
        raise TelegramUnavailable(
            f"Telegram did not answer {method} within {bound_s:g} s; retry later"
        )

    async def _initialize(self) -> None:
        """getMe, until it has succeeded once (a no-op then); a bot PTB cannot read is a
        `TelegramUnavailable` naming getMe."""
        try:
            await self._bot.initialize()
        except TelegramError as exc:
            raise translate_error(exc) from exc
        except Exception as exc:  # whatever PTB raises on a bot it cannot read
            raise unreadable_get_me(exc) from exc
