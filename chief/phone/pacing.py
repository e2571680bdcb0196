"""The pure part of the phone's Telegram delivery: pacing, the digest, quiet hours, backoff. No I/O;
the clocks come in as arguments.

Pacing is a token bucket per chat, of our own (a dozen lines). PTB's `AIORateLimiter` throttles
inside the send call (it would park the sender, and it needs PTB's optional extra), and
aiolimiter's `AsyncLimiter` only answers by waiting: the sender needs to *ask* whether a token
is free now, because the answer decides between ringing the lone entry at once and letting
entries pile up into one digest. The bucket runs slightly under Telegram's limits (see
`pacing_for`), so the door never meets the 429s the Bot API answers past them.

The digest: the entries still to ring, in order, joined into as few messages as fit the Bot
API's 4,096 UTF-16 units, each headed with its count ("3 updates"). One entry rings alone, as
its own text, with no header. A repeat after an in-doubt send (the door could not know whether
Telegram took it) is the same group's message behind `REPEAT_MARKER`; every message leaves room
for the marker, so the repeat of a group always fits one message, as the group did.

An ask (a request filed to the owner) never joins a digest: it rings alone, as its own text,
with its buttons (`keyboard_rows`), so a tap or a reply names one request.

Quiet hours: a window in the owner's time zone (`22:00-07:00` crosses midnight) inside which
messages go out with `disable_notification`: delivered, in order, silently.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, tzinfo

from chief.errors import DoorError

MAX_TELEGRAM_UTF16_UNITS = 4096
DIGEST_SEPARATOR = "\n\n"
# A digest carries at most this many entries (the sender reads no further down the queue).
MAX_DIGEST_ENTRIES = 256
# The start of a repeat whose first ring may have reached the owner (an in-doubt send).
REPEAT_MARKER = "(possible repeat) "

# Telegram: about 1 message/s per private chat, 20/min per group. The bucket stays under both
# (a burst of 2, not the emulator's 3; a token every 1.1 s, not 1.0), so clock skew between the
# door and Telegram never turns into a 429.
PRIVATE_BURST = 2
PRIVATE_INTERVAL_S = 1.1
GROUP_BURST = 2
GROUP_INTERVAL_S = 3.2

# Backoff of a failed send: doubling from 1 s, capped at 60 s, with up to 20 % jitter.
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
BACKOFF_JITTER = 0.2
# Float refill arithmetic may leave a token a few ulps short of whole: that is a whole token.
TOKEN_EPSILON = 1e-9
WINDOW = re.compile(r"\s*(\d{2}:\d{2})\s*-\s*(\d{2}:\d{2})\s*")  # fullmatch: no `$`


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class TokenBucket:
    """`capacity` tokens, one more every `interval_s`; starts full."""

    def __init__(self, capacity: int, interval_s: float, now: float) -> None:
        self.capacity = capacity
        self.interval_s = interval_s
        self._tokens = float(capacity)
        self._at = now

    def _refill(self, now: float) -> None:
        gained = max(0.0, now - self._at) / self.interval_s
        self._tokens = min(float(self.capacity), self._tokens + gained)
        self._at = now

    def wait_s(self, now: float) -> float:
        """Seconds until a token is free (0.0: one is free now)."""
        self._refill(now)
        missing = 1.0 - self._tokens
        return 0.0 if missing <= TOKEN_EPSILON else missing * self.interval_s

    def take(self, now: float) -> None:
        """Spend a token (call only when `wait_s(now) == 0`)."""
        self._refill(now)
        self._tokens -= 1.0


def pacing_for(chat_id: str) -> tuple[int, float]:
    """(burst, seconds per token) for a chat: a negative id or an @name is a group or channel."""
    private = chat_id.isdigit()
    return (PRIVATE_BURST, PRIVATE_INTERVAL_S) if private else (GROUP_BURST, GROUP_INTERVAL_S)


def digest_header(count: int) -> str:
    return f"{count} updates"


def compose(texts: list[str], *, repeat: bool = False) -> tuple[int, str]:
    """(how many of `texts`, from the first, one message carries; its text). One entry alone is
    its own text; more are a digest headed with their count, as many as fit 4,096 UTF-16 units
    with room left for `REPEAT_MARKER`, which starts the text when `repeat`. An entry too wide
    to share a message rings alone (cut by the sender if it must be)."""
    count, text = _compose(texts)
    return count, (REPEAT_MARKER + text if repeat else text)


def _compose(texts: list[str]) -> tuple[int, str]:
    if len(texts) <= 1:
        return len(texts), texts[0] if texts else ""
    separator = utf16_units(DIGEST_SEPARATOR)
    used = utf16_units(REPEAT_MARKER)
    count = 0
    for text in texts[:MAX_DIGEST_ENTRIES]:
        width = separator + utf16_units(text)
        header = utf16_units(digest_header(count + 1))
        if header + used + width > MAX_TELEGRAM_UTF16_UNITS:
            break
        used += width
        count += 1
    if count <= 1:
        return 1, texts[0]
    return count, DIGEST_SEPARATOR.join([digest_header(count), *texts[:count]])


# An ask's buttons side by side, this many to a row (two rows for four choices).
BUTTONS_PER_ROW = 2


def keyboard_rows(buttons: tuple[tuple[str, str], ...]) -> list[list[tuple[str, str]]]:
    """An ask's (label, token) buttons laid out as an inline keyboard's rows, in order."""
    return [
        list(buttons[start : start + BUTTONS_PER_ROW])
        for start in range(0, len(buttons), BUTTONS_PER_ROW)
    ]


def backoff_s(attempts: int, rng: random.Random | None = None) -> float:
    """The wait after the `attempts`-th failed try (1, 2, 4 .. 60 s, jittered)."""
    base = min(BACKOFF_FIRST_S * 2 ** max(attempts - 1, 0), BACKOFF_MAX_S)
    return base * (1.0 + BACKOFF_JITTER * (rng or random).random())


@dataclass(frozen=True)
class QuietHours:
    """A daily window in `zone` (None: the machine's local time) when messages go out silently."""

    start: time
    end: time
    zone: tzinfo | None = None

    def is_quiet(self, now: datetime) -> bool:
        """Whether the aware instant `now` falls inside the window, read in the owner's zone."""
        local = now.astimezone(self.zone).time().replace(tzinfo=None)
        if self.start <= self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end  # the window crosses midnight

    @property
    def window(self) -> str:
        """The window as the setting reads: `23:00-07:00`."""
        return f"{self.start:%H:%M}-{self.end:%H:%M}"

    @property
    def zone_name(self) -> str:
        """The zone the window is read in: its IANA name, or `local time` (the machine's)."""
        return "local time" if self.zone is None else str(self.zone)

    def named(self) -> str:
        """The window and its zone, as a person reads them: `23:00-07:00 (Europe/Rome)`."""
        return f"{self.window} ({self.zone_name})"

    def in_force(self, now_s: float) -> bool:
        """Whether the window holds at unix time `now_s`."""
        return self.is_quiet(datetime.fromtimestamp(now_s, UTC))

    def state(self, now_s: float) -> dict[str, object]:
        """The window as the door's status says it: `window`, `zone`, `in_force` now."""
        return {"window": self.window, "zone": self.zone_name, "in_force": self.in_force(now_s)}

    @classmethod
    def parse(cls, raw: str, zone: tzinfo | None) -> QuietHours:
        """`HH:MM-HH:MM`, or `DoorError` naming TELEGRAM_QUIET_HOURS."""
        match = WINDOW.fullmatch(raw)
        try:
            if match is None:
                raise ValueError(raw)
            start, end = time.fromisoformat(match[1]), time.fromisoformat(match[2])
        except ValueError as exc:
            raise DoorError(
                f"TELEGRAM_QUIET_HOURS={raw!r} is not a window such as 22:00-07:00"
            ) from exc
        if start == end:
            raise DoorError(f"TELEGRAM_QUIET_HOURS={raw!r} is empty: give two different times")
        return cls(start, end, zone)
