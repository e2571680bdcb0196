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
    ChatMigrated (a group's id, not    400 Bad Request: group chat was upgraded     chat_migrated
      followed: see below)             to a supergroup chat
    Forbidden "...blocked by the user" 403 Forbidden: bot was blocked by the user   bot_blocked
    Forbidden (any other)              403 Forbidden: bot was kicked ..., ...       forbidden

PTB's own words for a rejected token carry the token; the translation never does.

A group upgraded to a supergroup. The Bot API refuses every write to the old group with 400 and
`parameters.migrate_to_chat_id` (PTB: `ChatMigrated`, `new_chat_id`). A send follows it: the
door rings the supergroup from then on (`BotSender.moved`, logged once as
`telegram.chat_migrated`), tells the owner there once, and sends the refused message there (it
rang nothing, so nothing is lost or doubled). The door keeps the new chat for its next start
where it owns the setting (`keep_chat`: the pairing file is rewritten); a `TELEGRAM_CHAT_ID` it
cannot rewrite is named in the status with the value to set. An id that is not a supergroup's,
or a move of a chat the call did not name (an edit of an old message: moot, nothing left to
do), is not followed; elsewhere it is the refusal `chat_migrated`, naming what to set.

Answers. The Bot API answers `{"ok": true, "result": ...}` when it took a request (its
`result` the method's), else `{"ok": false, "error_code", "description"}` with an HTTP error
status. So `ok: true` is the one fact the door needs: Telegram took it. Every call the door
makes goes through PTB's public generic call (`call_api`, `Bot.do_api_request`), which hands
back the raw `result`, and only what the door needs of it is read: a send's message id (none
readable: the send is still done, never repeated, its missing id logged once:
`telegram.message_id_unreadable`); of an edit, a toast or the commands nothing at all. A 2xx
that is not that envelope (an empty body, a proxy's HTML) says nothing of what Telegram did:
`AnswerUnreadable`, which leaves a send in doubt like a lost answer. getMe is read by PTB
(`Bot.initialize`); a bot it cannot read (a `User` without `is_bot`) is a `TelegramUnavailable`
naming getMe, kept in `BotSender.problem` for the door's status, and asked again at each send.
Whatever PTB raises on an answer it cannot read is translated here and in
`chief.telegram.inbound`: nothing but `TelegramUnavailable` reaches the door.

Timeouts. A send has two bounds. getMe (only while the Bot is not initialised) and every phase
of sendMessage that comes before Telegram can have the message (waiting for a pooled
connection, connecting, writing the request) are bounded by `TELEGRAM_TIMEOUT_S`: past it the
send failed and nothing rang. Once sendMessage's request is written, its answer is awaited up to
the late-reply bound, `LATE_REPLY_FACTOR` x `TELEGRAM_TIMEOUT_S` (PTB's per-request
`read_timeout`, and one overall deadline over the call): a late answer is not a lost one, and it
still carries the message id. A send whose request went out and whose answer never came (the
bound passed, or the connection dropped while the answer was awaited: `AnswerLost`) is *in
doubt*: Telegram may have rung the phone. It is `TelegramUnavailable(in_doubt=True)`, and the
door repeats its rows once, marked (`chief.phone.ringer`). The door's own deadline for a slow
send (what it tells its status) is the ringer's.
"""

from __future__ import annotations

import contextlib
import datetime as dtm
import functools
import json
import os
import ssl
import time
import urllib.request
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
import httpx
import structlog
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import BaseRequest, RequestData
from telegram.warnings import PTBDeprecationWarning, PTBUserWarning

from chief.errors import ChiefError, TelegramRefused, TelegramUnavailable
from chief.loopback_http import is_loopback_host
from plumbing.statuses import status_words

log = structlog.get_logger("chief.telegram")

# A handful of connections: the door sends one row at a time, retries of a row wait on its lock.
CONNECTION_POOL_SIZE = 8
# How long the answer to a sendMessage that went out is awaited, in TELEGRAM_TIMEOUT_S: a reply
# later than this is taken as lost (the send is in doubt). 6 x the default 10 s is one minute.
LATE_REPLY_FACTOR = 6.0


# PTB's generic call (`Bot.do_api_request`), which hands back the raw `result`, advises its named
# method, which reads the result into PTB's objects: an answer it cannot read fails the call.
GENERIC_CALL_ADVICE = r"Please use 'Bot\.\w+'"


class AnswerLost(NetworkError):
    """The request was written and its answer never came (read timeout, dropped connection):
    Telegram may have acted on it."""


class AnswerUnreadable(AnswerLost):
    """The request was written and a 2xx came back that is not the Bot API's `{"ok": true,
    "result": ...}` (an empty body, a proxy's HTML page): what Telegram did is unknown."""


MAX_TELEGRAM_UTF16_UNITS = 4096
# Telegram's answer to a write to a group that became a supergroup (its parameters name the
# supergroup: `migrate_to_chat_id`).
MIGRATED_ANSWER = "400 Bad Request: group chat was upgraded to a supergroup chat"


@dataclass(frozen=True)
class ChatMove:
    """Telegram upgraded the door's group to a supergroup, and the door followed it: the chat it
    rang (`old`), the one it rings now (`new`, Telegram's `migrate_to_chat_id`), when (unix s),
    and what a person must still do so a restart keeps it (`action`; "" when the pairing file
    was rewritten)."""

    old: str
    new: str
    at: float
    action: str = ""

    def as_status(self) -> dict[str, Any]:
        return {"from": self.old, "to": self.new, "action": self.action}


def moved_words(move: ChatMove) -> str:
    """What the owner is told on the new chat, once, when the door follows it."""
    words = (
        f"This group became a supergroup, and Telegram gave it a new chat id ({move.new}): "
        "Coop's messages come here from now on."
    )
    return f"{words} To keep it after a restart: {move.action}." if move.action else words


# An inline keyboard: rows of (label, callback_data).
Buttons = Sequence[Sequence[tuple[str, str]]]


class TelegramSender(Protocol):
    async def send(
        self,
        text: str,
        *,
        silent: bool = False,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        chat: int | str | None = None,
    ) -> int | None:
        """Send `text` to the owner's chat, or to `chat` when given (a ladder's second person)
        (`silent`: with disable_notification; `buttons`: an inline keyboard under it;
        `reply_to`: as a reply to that message of the chat, sent alone when it is gone); return
        Telegram's message id (None: Telegram took it and its id cannot be read).

        Raise `TelegramUnavailable` (with `retry_after_s` when known) on any failure, with
        `in_doubt` when the request went out and its answer never came (it may have rung)."""
        ...


def send_options(
    buttons: Buttons | None, reply_to: int | None, chat: int | str | None = None
) -> dict[str, Any]:
    """`TelegramSender.send`'s optional arguments, only those given: a sender without them (a
    test's double) still rings every row that needs none."""
    options: dict[str, Any] = {}
    if buttons is not None:
        options["buttons"] = buttons
    if reply_to is not None:
        options["reply_to"] = reply_to
    if chat is not None:
        options["chat"] = chat
    return options


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
            self._transport = httpx.AsyncHTTPTransport(
                limits=self._limits, proxy=self._proxy, verify=tls_context()
            )

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
        if 200 <= response.status_code <= 299 and not is_envelope(content):
            raise AnswerUnreadable(
                f"Telegram answered {response.status_code} with what is not the Bot API's "
                f"answer: {_sample(content)}"
            )
        failed = server_failure(response.status_code, content)
        if failed is not None:
            raise NetworkError(failed)
        return response.status_code, content

    @staticmethod
    def parse_json_payload(payload: bytes) -> dict[str, Any]:
        """Telegram's JSON, as PTB's own reading (`BaseRequest.parse_json_payload`, documented
        to be overridden) but without its traceback in the log for a body that is not JSON:
        the caller's translation says it in one line."""
        try:
            document = json.loads(payload.decode("utf-8", "replace"))
        except ValueError as exc:
            raise TelegramError(f"Invalid server response: {_sample(payload)}") from exc
        if not isinstance(document, dict):
            raise TelegramError(f"Invalid server response: {_sample(payload)}")
        return document

    def _or_default(self, value: object) -> float | None:
        if isinstance(value, (int, float)) or value is None:
            return value
        return self._timeout_s  # PTB's DEFAULT_NONE: nothing asked for this call


def server_failure(status: int, content: bytes) -> str | None:
    """A 5xx in words, its status named as HTTP names it (`502 Bad Gateway`, then the Bot API's
    description when it says more); None for any other answer, and for a 5xx that carries the
    Bot API's `parameters` (PTB reads those: a `retry_after`). PTB turns every 5xx into a
    `NetworkError` whose words lose the status (`Internal Server Error` for a 502)."""
    if not 500 <= status <= 599:
        return None
    words = status_words(status)
    try:
        document = json.loads(content)
    except ValueError:  # a proxy's HTML page, an empty body
        document = None
    if isinstance(document, dict) and document.get("parameters"):
        return None
    said = document.get("description") if isinstance(document, dict) else None
    if isinstance(said, str) and said.strip() and not words.lower().endswith(said.strip().lower()):
        words += f" (its answer says: {said.strip()[:120]})"
    return words


def is_envelope(content: bytes) -> bool:
    """Whether a 2xx body is the Bot API's answer, `{"ok": true, "result": ...}`: Telegram took
    the request, whatever its result holds. Anything else (an empty body, HTML, `ok` missing)
    does not say what Telegram did."""
    try:
        document = json.loads(content)
    except ValueError:  # UnicodeDecodeError included
        return False
    return isinstance(document, dict) and document.get("ok") is True and "result" in document


def _sample(content: bytes) -> str:
    """The start of an answer, for a log line (never more than 80 characters)."""
    text = content[:80].decode("utf-8", "replace")
    return repr(text) if text else "an empty body"


async def call_api(bot: Bot, method: str, parameters: dict[str, Any], **timeouts: Any) -> Any:
    """The Bot API's `result` for `method`, as Telegram sent it (PTB's public generic call,
    `Bot.do_api_request`): Telegram took the request when this returns, whatever the result
    holds, and only what the caller needs of it is read. Raises PTB's errors
    (`translate_error`); `AnswerUnreadable` when the answer does not say what Telegram did."""
    warnings.filterwarnings("ignore", GENERIC_CALL_ADVICE, PTBUserWarning)
    return await bot.do_api_request(method, api_kwargs=parameters, **timeouts)


def sent_message_id(result: Any, method: str) -> int | None:
    """The message id of a message Telegram sent (`result`, a Message), or None when it cannot
    be read: logged once, and the send is still done (Telegram took it)."""
    message_id = result.get("message_id") if isinstance(result, dict) else None
    if isinstance(message_id, int) and not isinstance(message_id, bool) and message_id > 0:
        return message_id
    log.warning(
        "telegram.message_id_unreadable",
        method=method,
        answer=repr(result)[:200],
        hint="Telegram took the message; the door cannot name it (no edit of it later)",
    )
    return None


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's verifying TLS context, made once per process and shared by every Bot API
    transport (the door has three): loading the CA bundle costs ~80 ms of CPU each time."""
    return httpx.create_ssl_context()


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
        #: why Telegram cannot be used (its getMe failed or could not be read), until it can
        self.problem: TelegramUnavailable | None = None
        #: keeps the chat Telegram moved the group to for the next start (the pairing file);
        #: None: it came from TELEGRAM_CHAT_ID, which the door cannot rewrite
        self.keep_chat: Callable[[int], None] | None = None
        #: the move the door followed (a group upgraded to a supergroup), for its status
        self.moved: ChatMove | None = None

    async def start(self) -> None:
        """Open the connection pool and call getMe. A Bot API that is down at start, or whose
        getMe cannot be read, is logged once (`problem` keeps it for the door's status) and
        asked again at the next send: the door must still land reports in the Chief."""
        with contextlib.suppress(TelegramUnavailable):
            with anyio.move_on_after(self._timeout_s):
                await self._initialize()

    async def aclose(self) -> None:
        try:
            await self._bot.shutdown()
        except TelegramError as exc:
            log.warning("telegram.shutdown_failed", error=str(exc))

    async def send(
        self,
        text: str,
        *,
        silent: bool = False,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        chat: int | str | None = None,
    ) -> int | None:
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
            return await self._send(text, silent, inline_keyboard(buttons), reply_to, chat)
        if bound.cancelled_caught:
            raise TelegramUnavailable(
                f"Telegram did not answer sendMessage within {self.late_bound_s:g} s (the "
                f"late-reply bound, {LATE_REPLY_FACTOR:g} x TELEGRAM_TIMEOUT_S); it may have "
                "rung: the door repeats its rows once, marked",
                in_doubt=True,
            )
        raise AssertionError("unreachable: the send returned or its bound passed")

    async def _send(
        self,
        text: str,
        silent: bool,
        markup: InlineKeyboardMarkup | None,
        reply_to: int | None = None,
        chat: int | str | None = None,
    ) -> int | None:
        """sendMessage; its message id, or None when Telegram took it (`ok: true`) and its
        message cannot be read: the send is done either way, never repeated. A group upgraded
        to a supergroup is followed (`_follow`) and the message sent there: the refused send
        rang nothing, so nothing is lost or doubled. `chat`: another chat than the owner's (the
        second person's private chat, rung 2), which Telegram never upgrades: not followed."""
        if chat is not None:
            try:
                return await self._send_to(chat, text, silent, markup, reply_to)
            except ChatMigrated as exc:
                raise TelegramRefused.named(
                    "chat_migrated",
                    MIGRATED_ANSWER,
                    "pair the second person again: chief telegram pair --second",
                ) from exc
        try:
            return await self._send_to(self._chat_id, text, silent, markup, reply_to)
        except ChatMigrated as exc:
            move = self._follow(exc.new_chat_id)
        await self._tell_moved(move)
        try:
            return await self._send_to(self._chat_id, text, silent, markup, reply_to)
        except ChatMigrated as exc:  # the supergroup moved again: Telegram never does this
            raise unfollowable(exc.new_chat_id) from exc

    def _follow(self, new_chat_id: object) -> ChatMove:
        """Ring Telegram's `migrate_to_chat_id` from now on: logged once, kept for the next
        start where the door can (the pairing file), else what to set says so. A new id that
        is not a supergroup's is not followed: `TelegramRefused` names what to set."""
        old = str(self._chat_id)
        if (
            not isinstance(new_chat_id, int)
            or isinstance(new_chat_id, bool)
            or new_chat_id >= 0
            or str(new_chat_id) == old
        ):
            raise unfollowable(new_chat_id)
        new = str(new_chat_id)
        action = f"set TELEGRAM_CHAT_ID={new} (the door rings it until it restarts)"
        if self.keep_chat is not None:
            try:
                self.keep_chat(new_chat_id)
                action = ""
            except ChiefError as exc:
                action = f"{exc} (the door rings {new} until it restarts)"
        self._chat_id, self.chat_id = new_chat_id, new
        self.moved = ChatMove(old, new, time.time(), action)
        log.warning(
            "telegram.chat_migrated",
            from_chat=old,
            to_chat=new,
            kept=not action,
            action=action or "none: the pairing names the new chat",
        )
        return self.moved

    async def _tell_moved(self, move: ChatMove) -> None:
        """Tell the owner on the new chat, once; a failure is logged (the rows still ring)."""
        try:
            await self._send_to(self._chat_id, moved_words(move), False, None)
        except (TelegramError, TelegramUnavailable) as exc:  # ChatMigrated, or any other
            log.warning("telegram.chat_migrated_untold", to_chat=move.new, error=str(exc))

    async def _send_to(
        self,
        chat_id: int | str,
        text: str,
        silent: bool,
        markup: InlineKeyboardMarkup | None,
        reply_to: int | None = None,
    ) -> int | None:
        """sendMessage to `chat_id`: its message id (None: unreadable); `ChatMigrated` passes
        up to `_send`, every other failure is translated."""
        parameters: dict[str, Any] = {
            "chat_id": chat_id,
            "text": fit_for_telegram(text),
            "disable_notification": silent,
            "reply_markup": markup,
        }
        if reply_to is not None:
            # A reply (a reminder to its ask); sent alone when the owner deleted the message
            # replied to, rather than refused for ever (the Bot API's ReplyParameters).
            parameters["reply_parameters"] = ReplyParameters(
                message_id=reply_to, allow_sending_without_reply=True
            )
        try:
            # Connect, write and pool waits keep TELEGRAM_TIMEOUT_S (nothing was sent while they
            # last); the answer is awaited up to the late-reply bound. Only the message id is
            # read of the answer: a Message PTB cannot build (a `date` in milliseconds) was
            # still sent.
            result = await call_api(
                self._bot, "sendMessage", parameters, read_timeout=self.late_bound_s
            )
        except AnswerLost as exc:
            raise TelegramUnavailable(
                f"Telegram's answer to sendMessage was lost ({exc}); it may have rung: the door "
                "repeats its rows once, marked",
                in_doubt=True,
            ) from exc
        except ChatMigrated:
            raise
        except TelegramError as exc:
            raise translate_error(exc) from exc
        return sent_message_id(result, "sendMessage")

    async def edit(self, chat_id: int | str, message_id: int, text: str) -> None:
        """Replace a message's text and remove its buttons (a settled ask). Done when Telegram
        took it (`ok: true`, whatever its result holds), or says the message is already so
        ("message is not modified") or is gone ("message to edit not found"): an edit
        repeated after a lost answer, or a message deleted by the owner, has nothing left to
        do. Any other failure raises `TelegramUnavailable`."""
        with anyio.move_on_after(self._timeout_s) as deadline:
            await self._edit(chat_id, message_id, text)
        if deadline.cancelled_caught:
            raise TelegramUnavailable(
                f"Telegram did not answer editMessageText within {self._timeout_s:g} s "
                "(TELEGRAM_TIMEOUT_S); retry later"
            )

    async def _edit(self, chat_id: int | str, message_id: int, text: str) -> None:
        await self._initialize()
        # No reply_markup: an edit without one removes the inline keyboard (PTB sends an
        # empty keyboard as "{}", which is not one).
        parameters = {"chat_id": chat_id, "message_id": message_id, "text": fit_for_telegram(text)}
        try:
            await call_api(self._bot, "editMessageText", parameters)
        except ChatMigrated as exc:
            # The message is in the group Telegram made a supergroup: it cannot be edited
            # there any more, and the supergroup never had it. Nothing left to do.
            log.info("telegram.edit_moot", message_id=message_id, answer=MIGRATED_ANSWER,
                     to_chat=exc.new_chat_id)  # fmt: skip
        except BadRequest as exc:
            if not edit_is_moot(exc.message):
                raise translate_error(exc) from exc
            log.info("telegram.edit_moot", telegram_message_id=message_id, answer=exc.message)
        except TelegramError as exc:
            raise translate_error(exc) from exc

    async def _initialize(self) -> None:
        """getMe, until it has succeeded once (Bot.initialize is a no-op then); its failure, or
        a bot PTB cannot read, kept in `problem` and logged once per outage."""
        try:
            await self._bot.initialize()
        except TelegramError as exc:
            raise self._unusable(translate_error(exc)) from exc
        except Exception as exc:  # whatever PTB raises on a bot it cannot read
            raise self._unusable(unreadable_get_me(exc)) from exc
        if self.problem is not None:
            log.info("telegram.usable_again", after=self.problem.message)
            self.problem = None

    def _unusable(self, exc: TelegramUnavailable) -> TelegramUnavailable:
        if self.problem is None or self.problem.message != exc.message:
            log.warning("telegram.init_failed", error=exc.message)
        self.problem = exc
        return exc


def unreadable_get_me(exc: Exception) -> TelegramUnavailable:
    """Telegram answered getMe (`ok: true`) with a bot python-telegram-bot cannot read: nothing
    can ring until it can (the Bot API is not the one this door speaks)."""
    return TelegramUnavailable(
        f"Telegram answered getMe with a bot the door cannot read ({type(exc).__name__}: "
        f"{str(exc)[:120]}); nothing rings until it can: check TELEGRAM_API_BASE; the door asks "
        "again at each send"
    )


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
        f"Telegram refused or could not be reached ({error_words(exc)}); retry later"
    )


#: The HTTP status behind each of PTB's errors that stands for one (the rest are network
#: failures, or a 5xx already in words: `server_failure`).
_STATUS_OF: tuple[tuple[type[TelegramError], HTTPStatus], ...] = (
    (BadRequest, HTTPStatus.BAD_REQUEST),
    (Forbidden, HTTPStatus.FORBIDDEN),
    (Conflict, HTTPStatus.CONFLICT),
    (InvalidToken, HTTPStatus.UNAUTHORIZED),
)


def error_words(exc: TelegramError) -> str:
    """A PTB error as a person reads it: Telegram's answer with its HTTP status in words
    (`400 Bad Request: message text is empty`), or the failure's own words; never PTB's class
    name."""
    for kind, status in _STATUS_OF:
        if isinstance(exc, kind):
            return f"{status_words(status)}: {exc.message}"
    return exc.message


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
    if isinstance(exc, ChatMigrated):
        return unfollowable(exc.new_chat_id)
    description = exc.message.lower()
    if isinstance(exc, BadRequest) and "upgraded to a supergroup" in description:
        return unfollowable(None)  # the answer did not say the supergroup's id
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


def unfollowable(new_chat_id: object) -> TelegramRefused:
    """A group upgraded to a supergroup whose new id the door cannot ring: what to set."""
    usable = isinstance(new_chat_id, int) and not isinstance(new_chat_id, bool) and new_chat_id < 0
    target = f"TELEGRAM_CHAT_ID={new_chat_id}" if usable else "TELEGRAM_CHAT_ID to its id"
    named = f" (migrate_to_chat_id {new_chat_id})" if new_chat_id is not None else ""
    return TelegramRefused.named(
        "chat_migrated",
        MIGRATED_ANSWER + named,
        f"set {target} (Telegram made the group a supergroup) and restart the door",
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
