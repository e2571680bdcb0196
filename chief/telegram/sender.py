"""The Telegram sender seam: one verb, `send(text) -> message id`, or `TelegramUnavailable`.

`BotSender` is the real one, on python-telegram-bot's `Bot` pointed at `base_url` (the real Bot
API or the project's emulator). One `Bot` (and its HTTP connection pool) stays open from
`start()` to `aclose()`. Every failure of a send, whatever python-telegram-bot raised
(`RetryAfter`, `TimedOut`, `NetworkError`, any other `TelegramError`), is translated in
`translate_error`, the one place that knows PTB's error tree; the door sees only
`TelegramUnavailable`, with `retry_after_s` when Telegram said how long to wait.
"""

from __future__ import annotations

import datetime as dtm
import os
import warnings
from typing import Protocol

import structlog
from telegram import Bot
from telegram.error import RetryAfter, TelegramError, TimedOut
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from chief.errors import TelegramUnavailable

log = structlog.get_logger("chief.telegram")

# A handful of connections: the door sends one row at a time, retries of a row wait on its lock.
CONNECTION_POOL_SIZE = 8


class TelegramSender(Protocol):
    async def send(self, text: str) -> int:
        """Send `text` to the owner's chat; return Telegram's message id.

        Raise `TelegramUnavailable` (with `retry_after_s` when known) on any failure."""
        ...


class BotSender:
    """The real sender: python-telegram-bot's `Bot`, initialised once and kept open."""

    def __init__(self, token: str, chat_id: str, *, base_url: str, timeout_s: float) -> None:
        request = HTTPXRequest(
            connection_pool_size=CONNECTION_POOL_SIZE,
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            write_timeout=timeout_s,
            pool_timeout=timeout_s,
        )
        # PTB 22 warns inside RetryAfter's own constructor unless the process opts in to the
        # future type of `retry_after` (a timedelta). We read it type-agnostically
        # (retry_after_seconds), so opt in: otherwise the warning turns a flood-control answer
        # into a crash wherever warnings are errors (the test suite), and is noise elsewhere.
        os.environ.setdefault("PTB_TIMEDELTA", "true")
        self._bot = Bot(token, base_url=base_url, request=request)
        self._chat_id: int | str = int(chat_id) if _is_int(chat_id) else chat_id

    async def start(self) -> None:
        """Open the connection pool and call getMe. A Bot API that is down at start is logged
        and retried on the first send: the door must still land reports in the Chief."""
        try:
            await self._initialize()
        except TelegramUnavailable as exc:
            log.warning("telegram.init_failed", error=str(exc))

    async def aclose(self) -> None:
        try:
            await self._bot.shutdown()
        except TelegramError as exc:
            log.warning("telegram.shutdown_failed", error=str(exc))

    async def send(self, text: str) -> int:
        await self._initialize()
        try:
            message = await self._bot.send_message(chat_id=self._chat_id, text=text)
        except TelegramError as exc:
            raise translate_error(exc) from exc
        return message.message_id

    async def _initialize(self) -> None:
        # Bot.initialize is a no-op once it succeeded and retries getMe after a failure.
        try:
            await self._bot.initialize()
        except TelegramError as exc:
            raise translate_error(exc) from exc


def translate_error(exc: TelegramError) -> TelegramUnavailable:
    """The one mapping from python-telegram-bot's errors to the door's `TelegramUnavailable`."""
    if isinstance(exc, RetryAfter):
        retry_after_s = retry_after_seconds(exc)
        return TelegramUnavailable(
            f"Telegram asked to wait {retry_after_s:g} s (flood control); retry after that",
            retry_after_s=retry_after_s,
        )
    if isinstance(exc, TimedOut):
        return TelegramUnavailable(f"Telegram did not answer in time ({exc}); retry later")
    return TelegramUnavailable(
        f"Telegram refused or could not be reached ({type(exc).__name__}: {exc}); retry later"
    )


def retry_after_seconds(exc: RetryAfter) -> float:
    """`RetryAfter.retry_after` in seconds, whichever type this PTB version returns."""
    # PTB 22 warns on reading an int period unless PTB_TIMEDELTA is set; the value is the same.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    if isinstance(value, dtm.timedelta):
        return value.total_seconds()
    return float(value)


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def build_sender(
    token: str | None, chat_id: str | None, *, base_url: str, timeout_s: float
) -> BotSender | None:
    """The configured sender, or None when Telegram is not configured."""
    if token is None or chat_id is None:
        return None
    return BotSender(token, chat_id, base_url=base_url, timeout_s=timeout_s)
