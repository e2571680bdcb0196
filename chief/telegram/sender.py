"""The Telegram sender seam: one verb, `send(text, buttons=...) -> message id`, or
`TelegramUnavailable`; `BotSender.edit` replaces a settled ask's text and removes its buttons.

`BotSender` is the real one, on python-telegram-bot's `Bot` pointed at `base_url` (the real Bot
API or the project's emulator). One `Bot` (and its HTTP connection pool) stays open from
`start()` to `aclose()`. Its HTTP layer is `TransportRequest`, PTB's own request seam
(`BaseRequest.do_request`) on one keep-alive httpx transport: PTB's default hands every call to
an `httpx.AsyncClient`, whose per-request merging of cookies, auth and redirects (none of which
the Bot API uses) cost the door ~0.4 ms of CPU per message on a 2-core machine. PTB still builds
the request and parses the answer, so its error tree is the same.

Every failure of a send, whatever python-telegram-bot raised (`RetryAfter`, `TimedOut`,
`NetworkError`, any other `TelegramError`), is translated in `translate_error`, the one place
that knows PTB's error tree; the door sees only `TelegramUnavailable`, with `retry_after_s` when
Telegram said how long to wait. Telegram's permanent refusals, which no retry cures, are its
subclass `TelegramRefused`, named with what a person does about them:

    PTB error                          Telegram's answer                            kind
    InvalidToken                       401 Unauthorized (404 for a malformed token) bad_token
    BadRequest "Chat not found"        400 Bad Request: chat not found              chat_not_found
    Forbidden "...blocked by the user" 403 Forbidden: bot was blocked by the user   bot_blocked
    Forbidden (any other)              403 Forbidden: bot was kicked ..., ...       forbidden

PTB's own words for a rejected token carry the token; the translation never does.

Timeouts. A send has two bounds. getMe (only while the Bot is not initialised) and every phase
of sendMessage that comes before Telegram can have the message (waiting for a pooled
connection, connecting, writing the request) are bounded by `TELEGRAM_TIMEOUT_S`: past it the
send failed and nothing rang. Once sendMessage's request is written, its answer is awaited up to
the late-reply bound, `LATE_REPLY_FACTOR` x `TELEGRAM_TIMEOUT_S` (PTB's per-request
`read_timeout`, and one overall deadline over the call): a late answer is not a lost one, and it
still carries the message id. A send whose request went out and whose answer never came (the
bound passed, or the connection dropped while the answer was awaited: `AnswerLost`) is *in
doubt*: Telegram may have rung the phone. It is `TelegramUnavailable(in_doubt=True)`, and the
door repeats its rows once, marked (`chief.door.ringer`). The door's own deadline for a slow
send (what it tells its status) is the ringer's.
"""

from __future__ import annotations

import datetime as dtm
import os
import urllib.request
import warnings
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit

import anyio
import httpx
import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import (
    BadRequest,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import BaseRequest, RequestData
from telegram.warnings import PTBDeprecationWarning

from chief.errors import TelegramRefused, TelegramUnavailable
from chief.loopback_http import is_loopback_host

log = structlog.get_logger("chief.telegram")

# A handful of connections: the door sends one row at a time, retries of a row wait on its lock.
CONNECTION_POOL_SIZE = 8
# How long the answer to a sendMessage that went out is awaited, in TELEGRAM_TIMEOUT_S: a reply
# later than this is taken as lost (the send is in doubt). 6 x the default 10 s is one minute.
LATE_REPLY_FACTOR = 6.0


class AnswerLost(NetworkError):
    """The request was written and its answer never came (read timeout, dropped connection):
    Telegram may have acted on it."""


MAX_TELEGRAM_UTF16_UNITS = 4096


# An inline keyboard: rows of (label, callback_data).
Buttons = Sequence[Sequence[tuple[str, str]]]


class TelegramSender(Protocol):
    async def send(self, text: str, *, silent: bool = False, buttons: Buttons | None = None) -> int:
        """Send `text` to the owner's chat (`silent`: with disable_notification; `buttons`: an
        inline keyboard under it); return Telegram's message id.

        Raise `TelegramUnavailable` (with `retry_after_s` when known) on any failure, with
        `in_doubt` when the request went out and its answer never came (it may have rung)."""
        ...


def inline_keyboard(buttons: Buttons | None) -> InlineKeyboardMarkup | None:
    """PTB's inline keyboard for `buttons` (None for none)."""
    if buttons is None:
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(label, callback_data=data) for label, data in row]
            for row in buttons
        ]
    )


def fit_for_telegram(text: str) -> str:
    """`text` cut to the Bot API's 4,096 UTF-16 units, with a visible marker.

    The door accepts 4,000 characters, but a character outside the Basic Multilingual Plane (an
    emoji) is two UTF-16 units: such a text would be refused by Telegram on every retry, for
    ever. The Master Chief keeps the whole line; only the phone's copy is cut."""
    if _utf16_units(text) <= MAX_TELEGRAM_UTF16_UNITS:
        return text
    marker = " … [cut for Telegram; the whole line is in the Master Chief]"
    budget = MAX_TELEGRAM_UTF16_UNITS - _utf16_units(marker)
    kept, used = [], 0
    for char in text:
        used += _utf16_units(char)
        if used > budget:
            break
        kept.append(char)
    return "".join(kept) + marker


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class TransportRequest(BaseRequest):
    """PTB's request seam on one keep-alive httpx transport (form-encoded bodies, as PTB's
    `HTTPXRequest` sends them; this sender never uploads files). httpx errors are translated
    the way `HTTPXRequest` translates them: timeouts to `TimedOut`, the rest to `NetworkError`.

    An HTTP(S)_PROXY / ALL_PROXY in the environment, unless NO_PROXY names the host, is used
    for the Bot API, as PTB's default client (httpx with trust_env) did."""

    def __init__(self, base_url: str, *, timeout_s: float, pool_size: int) -> None:
        self._timeout_s = timeout_s
        self._limits = httpx.Limits(max_connections=pool_size, max_keepalive_connections=pool_size)
        self._proxy = environment_proxy(base_url)
        self._transport: httpx.AsyncHTTPTransport | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._timeout_s

    async def initialize(self) -> None:
        if self._transport is None:
            self._transport = httpx.AsyncHTTPTransport(limits=self._limits, proxy=self._proxy)

    async def shutdown(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._transport is None:
            raise RuntimeError("this TransportRequest is not initialized")
        if request_data is not None and request_data.contains_files:
            raise NetworkError("the Coop sender sends text only; file uploads are not supported")
        headers = [(b"User-Agent", self.USER_AGENT.encode("ascii"))]
        body = b""
        if request_data is not None and request_data.parameters:
            body = request_data.url_encoded_parameters().encode("ascii")
            headers.append((b"Content-Type", b"application/x-www-form-urlencoded"))
        timeouts = {
            "connect": self._or_default(connect_timeout),
            "read": self._or_default(read_timeout),
            "write": self._or_default(write_timeout),
            "pool": self._or_default(pool_timeout),
        }
        request = httpx.Request(
            method, url, headers=headers, content=body, extensions={"timeout": timeouts}
        )
        try:
            response = await self._transport.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.PoolTimeout):
                raise TimedOut(
                    "Pool timeout: every connection to the Bot API is busy; the request was not "
                    "sent"
                ) from exc
            if isinstance(exc, httpx.ReadTimeout):
                raise AnswerLost("no answer within the read timeout; the request was sent") from exc
            raise TimedOut from exc
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            # The request went out (a write or connect error is raised before this point).
            raise AnswerLost(f"httpx.{type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise NetworkError(f"httpx.{type(exc).__name__}: {exc}") from exc
        return response.status_code, content

    def _or_default(self, value: object) -> float | None:
        if isinstance(value, (int, float)) or value is None:
            return value
        return self._timeout_s  # PTB's DEFAULT_NONE: nothing asked for this call


def environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY); never
    one for a loopback Bot API (the local emulator): no loopback call in the project follows
    an environment proxy, which would see the bot token."""
    parts = urlsplit(url)
    if is_loopback_host(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies_environment()
    if not proxies or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class BotSender:
    """The real sender: python-telegram-bot's `Bot`, initialised once and kept open."""

    def __init__(self, token: str, chat_id: str, *, base_url: str, timeout_s: float) -> None:
        request = TransportRequest(base_url, timeout_s=timeout_s, pool_size=CONNECTION_POOL_SIZE)
        # PTB 22 warns inside RetryAfter's own constructor unless the process opts in to the
        # future type of `retry_after` (a timedelta). We read it type-agnostically
        # (retry_after_seconds), so opt in: otherwise the warning turns a flood-control answer
        # into a crash wherever warnings are errors (the test suite), and is noise elsewhere.
        os.environ.setdefault("PTB_TIMEDELTA", "true")
        self._bot = Bot(token, base_url=base_url, request=request)
        self._timeout_s = timeout_s
        #: how long a sendMessage that went out is awaited (see Timeouts above)
        self.late_bound_s = LATE_REPLY_FACTOR * timeout_s
        self._chat_id: int | str = int(chat_id) if _is_int(chat_id) else chat_id
        #: the chat as configured, for pacing
        self.chat_id = chat_id

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

    async def send(self, text: str, *, silent: bool = False, buttons: Buttons | None = None) -> int:
        # One deadline over each call, not PTB's per-phase timeouts alone (each read, each
        # phase): a slow getMe followed by a stuck sendMessage once took the door past the
        # engine's client timeout. getMe touches no chat: its deadline is TELEGRAM_TIMEOUT_S.
        with anyio.move_on_after(self._timeout_s) as deadline:
            await self._initialize()
        if deadline.cancelled_caught:
            raise TelegramUnavailable(
                f"Telegram did not answer getMe within {self._timeout_s:g} s "
                "(TELEGRAM_TIMEOUT_S); retry later"
            )
        with anyio.move_on_after(self.late_bound_s) as bound:
            return await self._send(text, silent, inline_keyboard(buttons))
        if bound.cancelled_caught:
            raise TelegramUnavailable(
                f"Telegram did not answer sendMessage within {self.late_bound_s:g} s (the "
                f"late-reply bound, {LATE_REPLY_FACTOR:g} x TELEGRAM_TIMEOUT_S); it may have "
                "rung: the door repeats its rows once, marked",
                in_doubt=True,
            )
        raise AssertionError("unreachable: the send returned or its bound passed")

    async def _send(self, text: str, silent: bool, markup: InlineKeyboardMarkup | None) -> int:
        try:
            # The public Bot.send_message, not the private Bot._post under it: parsing the whole
            # Message costs ~0.15 ms per send, cheaper than a door that breaks on a library
            # upgrade. Connect, write and pool waits keep TELEGRAM_TIMEOUT_S (nothing was sent
            # while they last); the answer is awaited up to the late-reply bound.
            message = await self._bot.send_message(
                chat_id=self._chat_id,
                text=fit_for_telegram(text),
                disable_notification=silent,
                reply_markup=markup,
                read_timeout=self.late_bound_s,
            )
        except AnswerLost as exc:
            raise TelegramUnavailable(
                f"Telegram's answer to sendMessage was lost ({exc}); it may have rung: the door "
                "repeats its rows once, marked",
                in_doubt=True,
            ) from exc
        except TelegramError as exc:
            raise translate_error(exc) from exc
        except (KeyError, TypeError, ValueError) as exc:
            # An answer PTB could not read as a Message: a failed send, deferred like any other.
            raise TelegramUnavailable(
                f"Telegram answered sendMessage with no readable message ({exc}); retry later"
            ) from exc
        return message.message_id

    async def edit(self, chat_id: int | str, message_id: int, text: str) -> None:
        """Replace a message's text and remove its buttons (a settled ask). Done when Telegram
        says the message is already so ("message is not modified") or is gone ("message to
        edit not found"): an edit repeated after a lost answer, or a message deleted by the
        owner, has nothing left to do. Any other failure raises `TelegramUnavailable`."""
        with anyio.move_on_after(self._timeout_s) as deadline:
            await self._edit(chat_id, message_id, text)
        if deadline.cancelled_caught:
            raise TelegramUnavailable(
                f"Telegram did not answer editMessageText within {self._timeout_s:g} s "
                "(TELEGRAM_TIMEOUT_S); retry later"
            )

    async def _edit(self, chat_id: int | str, message_id: int, text: str) -> None:
        await self._initialize()
        try:
            # No reply_markup: an edit without one removes the inline keyboard (PTB sends an
            # empty keyboard as "{}", which is not one).
            await self._bot.edit_message_text(
                fit_for_telegram(text), chat_id=chat_id, message_id=message_id
            )
        except BadRequest as exc:
            if not edit_is_moot(exc.message):
                raise translate_error(exc) from exc
            log.info("telegram.edit_moot", message_id=message_id, answer=exc.message)
        except TelegramError as exc:
            raise translate_error(exc) from exc

    async def _initialize(self) -> None:
        # Bot.initialize is a no-op once it succeeded and retries getMe after a failure.
        try:
            await self._bot.initialize()
        except TelegramError as exc:
            raise translate_error(exc) from exc


def edit_is_moot(description: str) -> bool:
    """Whether Telegram's refusal of an edit means there is nothing left to do: the message
    already reads so, or it is gone."""
    lowered = description.lower()
    return "message is not modified" in lowered or "message to edit not found" in lowered


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
    refused = _permanent_refusal(exc)
    if refused is not None:
        return refused
    return TelegramUnavailable(
        f"Telegram refused or could not be reached ({type(exc).__name__}: {exc}); retry later"
    )


def _permanent_refusal(exc: TelegramError) -> TelegramRefused | None:
    """The refusals no retry cures, named with what to do; None for any other error."""
    if isinstance(exc, InvalidToken):
        # Bot.initialize re-raises Telegram's answer with the token in its words: read the
        # answer it wraps (a malformed token is a 404, an unknown one a 401), never the wrapper.
        while isinstance(exc.__cause__, InvalidToken):
            exc = exc.__cause__
        answer = "404 Not Found" if exc.message == "Not Found" else "401 Unauthorized"
        return TelegramRefused.named(
            "bad_token",
            answer,
            "fix TELEGRAM_BOT_TOKEN (Telegram knows no bot by this token; use the one "
            "@BotFather gave) and restart the door",
        )
    description = exc.message.lower()
    if isinstance(exc, BadRequest) and "chat not found" in description:
        return TelegramRefused.named(
            "chat_not_found",
            "400 Bad Request: chat not found",
            "fix TELEGRAM_CHAT_ID (Telegram knows no such chat for this bot; the owner must "
            "have sent the bot /start) and restart the door",
        )
    if isinstance(exc, Forbidden):
        if "blocked" in description:
            action = "the owner must unblock the bot in Telegram"
            kind = "bot_blocked"
        else:
            action = "let the bot write to the chat again (add it back, or start a chat with it)"
            kind = "forbidden"
        return TelegramRefused.named(
            kind, f"403 {exc.message}", action + "; the door tries again at its backoff cap"
        )
    return None


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
