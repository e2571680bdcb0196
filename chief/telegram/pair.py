"""`chief telegram pair`'s session: find the owner's chat by a one-time code.

`PairingSession` checks the token (`getMe`), makes a one-time code (`secrets`: 8 base32
characters, 40 bits, compared without regard to case), and long-polls `getUpdates` with
python-telegram-bot's public `telegram.Bot` until `/start CODE` comes from a private chat, or
the deadline passes. Each `/start` that is not the match (a wrong code, no code, a group chat) is
answered in its chat with why nothing was paired; any other update is read and passed over. Every
update read is confirmed (the next offset), so the door, the one other reader, never sees the
`/start` later. A failed poll is tried again (every `RETRY_S`) until the deadline, but a token
Telegram refuses ends the wait at once. On a match the pairing is written
(`chief.telegram.pairing`), the chat is told, and the pairing returned. Every PTB failure is
translated in `chief.telegram.sender`, and the token never appears in a message.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import math
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TextIO, TypeVar

import anyio
from telegram import Bot, Update
from telegram.error import TelegramError

from chief.errors import TelegramRefused, TelegramUnavailable
from chief.telegram.pairing import Pairing, write_pairing
from chief.telegram.sender import TransportRequest, translate_error

T = TypeVar("T")

CODE_BYTES = 5  # 8 base32 characters
# One long poll at most this long: the countdown is shown between two.
MAX_POLL_S = 25.0
# After a failed poll (network, Telegram's 5xx, a 409 from another reader), the next one.
RETRY_S = 2.0
START = re.compile(r"/start(?:@\w+)?(?:\s+(\S+))?\s*", re.IGNORECASE)
PAIRED_WORDS = (
    "Paired with Coop: this chat now gets the household's messages, and you can answer them here."
)
SECOND_PAIRED_WORDS = (
    "Paired with Coop as the second person: an urgent report nobody acknowledges in time rings "
    "here too; tap Got it to acknowledge it. /status and /help work here."
)
OWNER_AS_SECOND = (
    "This is the owner's own account: nothing is paired. The second person sends /start CODE "
    "from their own Telegram."
)


def new_code() -> str:
    """A one-time code: 8 characters of A-Z and 2-7."""
    return base64.b32encode(secrets.token_bytes(CODE_BYTES)).decode("ascii")


class PairingSession:
    """One pairing: `start()` (getMe, the code), then `wait(deadline)`; `aclose()` at the end."""

    def __init__(self, token: str, *, api_base: str, timeout_s: float) -> None:
        os.environ.setdefault("PTB_TIMEDELTA", "true")  # as chief.telegram.sender opts in
        self._token = token
        self._timeout_s = timeout_s
        self._bot = Bot(
            token,
            base_url=api_base,
            request=TransportRequest(api_base, timeout_s=timeout_s, pool_size=2),
            get_updates_request=TransportRequest(api_base, timeout_s=timeout_s, pool_size=1),
        )
        self.code = new_code()
        #: what the paired chat is told (the second person's words for `--second`)
        self.paired_words = PAIRED_WORDS
        self.bot_name = ""
        self._offset: int | None = None
        #: the last failed poll's words, retried until the deadline (None: none failed)
        self.last_error: str | None = None

    async def start(self) -> str:
        """Check the token with getMe; the bot's @name."""
        with anyio.move_on_after(self._timeout_s) as bound:
            await self._call(self._bot.initialize)
        if bound.cancelled_caught:
            raise TelegramUnavailable(f"Telegram did not answer getMe within {self._timeout_s:g} s")
        self.bot_name = "@" + (self._bot.username or "")
        return self.bot_name

    async def aclose(self) -> None:
        with contextlib.suppress(TelegramError):  # nothing left to tell: the session is over
            await self._bot.shutdown()

    async def wait(
        self,
        deadline: float,
        pairing_file: Path,
        tick: Callable[[float], float],
        *,
        not_user: int | None = None,
    ) -> Pairing | None:
        """Poll until `/start CODE` comes from a private chat (written to `pairing_file`,
        answered, returned) or `deadline` (monotonic) passes (None). `tick(left_s)` shows the
        countdown and answers how long the next poll may last."""
        while (left_s := deadline - time.monotonic()) > 0:
            # Telegram takes whole seconds; the last poll may end up to a second late.
            poll_s = max(1, math.ceil(min(left_s, tick(left_s), MAX_POLL_S)))
            try:
                updates = await self._call(
                    partial(self._bot.get_updates, offset=self._offset, timeout=poll_s)
                )
            except TelegramRefused:
                raise  # a revoked token: no retry cures it
            except TelegramUnavailable as exc:
                # A network blip or Telegram's 5xx must not end a ten-minute wait: try again
                # shortly, and say the last failure if the wait runs out.
                self.last_error = str(exc)
                await anyio.sleep(min(RETRY_S, max(deadline - time.monotonic(), 0.0)))
                continue
            paired = await self._examine(updates, pairing_file, not_user)
            if paired is not None:
                await self.confirm()
                return paired
        await self.confirm()
        return None

    async def _examine(
        self, updates: Sequence[Update], pairing_file: Path, not_user: int | None = None
    ) -> Pairing | None:
        for update in updates:
            self._offset = update.update_id + 1
            message = update.message
            if message is None or message.text is None or message.from_user is None:
                continue
            match = START.fullmatch(message.text.strip())
            if match is None:
                continue
            private = message.chat.type == "private" and message.chat.id == message.from_user.id
            code = match[1] or ""
            right = hmac.compare_digest(code.upper().encode(), self.code.encode())
            if private and right and message.from_user.id == not_user:
                await self._tell(message.chat.id, OWNER_AS_SECOND)
                continue
            if private and right:
                user = message.from_user
                pairing = Pairing(
                    chat_id=message.chat.id,
                    user_id=user.id,
                    username=user.username,
                    first_name=user.first_name,
                    bot=self.bot_name,
                    paired_at=datetime.now(UTC).isoformat(timespec="seconds"),
                )
                write_pairing(pairing_file, pairing)
                await self._tell(message.chat.id, self.paired_words)
                return pairing
            await self._tell(message.chat.id, self._refusal(private, bool(code)))
        return None

    def _refusal(self, private: bool, had_code: bool) -> str:
        if not private:
            return f"Nothing is paired: pair in a private chat with {self.bot_name}."
        if not had_code:
            return "Nothing is paired: send /start with the code `chief telegram pair` printed."
        return "That code is wrong: nothing is paired."

    async def _tell(self, chat_id: int, text: str) -> None:
        """Answer in that chat; a failure to answer does not stop the pairing."""
        with contextlib.suppress(TelegramUnavailable):
            await self._call(lambda: self._bot.send_message(chat_id, text))

    async def confirm(self) -> None:
        """Confirm every update read (bounded): the door must not read them again."""
        if self._offset is None:
            return
        with anyio.move_on_after(self._timeout_s):
            # at worst the door reads an old /start and passes over it
            with contextlib.suppress(TelegramUnavailable):
                await self._call(lambda: self._bot.get_updates(offset=self._offset, timeout=0))

    async def _call(self, call: Callable[[], Awaitable[T]]) -> T:
        """`await call()`, every PTB failure one `TelegramUnavailable` without the token."""
        try:
            return await call()
        except TelegramError as exc:
            failure = translate_error(exc)
            if isinstance(failure, TelegramRefused) and failure.kind == "bad_token":
                raise TelegramUnavailable(
                    f"Telegram knows no bot by this token ({failure.answer}): check "
                    "TELEGRAM_BOT_TOKEN (the token @BotFather gave)"
                ) from exc
            raise TelegramUnavailable(str(failure).replace(self._token, "<token>")) from exc
        except Exception as exc:  # whatever PTB raises on an answer it cannot read
            raise TelegramUnavailable(
                f"Telegram answered with something the pairing cannot read ({type(exc).__name__}"
                f": {str(exc)[:120]}); check TELEGRAM_API_BASE".replace(self._token, "<token>")
            ) from exc


class Countdown:
    """The wait, shown on `stream`: one line rewritten each second on a terminal, else a line
    per minute (a log or a pipe keeps every line). `tick(left_s)` shows it and answers how long
    until the next showing."""

    def __init__(self, stream: TextIO, prog: str) -> None:
        self._stream = stream
        self._prog = prog
        self._terminal = stream.isatty()
        self._last_minute: int | None = None

    def tick(self, left_s: float) -> float:
        if self._terminal:
            whole = math.ceil(left_s)
            self._stream.write(f"\r{self._prog}: waiting, {whole // 60}:{whole % 60:02d} left ")
            self._stream.flush()
            return 1.0
        minute = math.ceil(left_s / 60)
        if minute != self._last_minute:
            self._last_minute = minute
            shown = _minutes(minute) if minute > 1 else f"{math.ceil(left_s)} s"
            self._stream.write(f"{self._prog}: waiting, {shown} left\n")
            self._stream.flush()
        return left_s - (minute - 1) * 60  # until the next whole minute left

    def finish(self) -> None:
        """End the rewritten line, so what follows starts on its own."""
        if self._terminal:
            self._stream.write("\n")
            self._stream.flush()


def _minutes(count: int) -> str:
    return "1 minute" if count == 1 else f"{count} minutes"
