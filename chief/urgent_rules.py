"""The rules and words of urgent reports (issue 28), pure: no store, no clock of its own.

An urgent report (a notify row with top-level `urgent: true`: `coop notify --urgent`, or a
request filed to the owner with `--urgent`) rings alone and with sound, whatever the quiet
hours or the owner's /quiet say, with a "Got it" button, and rings again every `rering_s`
until the owner acknowledges it (taps "Got it", answers its request, or replies to any of its
messages) or `expire_s` has passed since it was accepted. Its bounds:

    CHIEF_URGENT_RERING_S   60     seconds between two rings; at least MIN_RERING_S (30) in
                                   any production setting
    CHIEF_URGENT_EXPIRE_S   3600   seconds after which it stops ringing and lands a line saying
                                   it went unacknowledged; at most MAX_EXPIRE_S (3 h), at least
                                   one interval
    CHIEF_ESCALATE_AFTER_S  600    seconds after which a report nobody acknowledged climbs to
                                   rung 2 of its ladder: the second person's chat rings too
                                   (issue 35); at least MIN_ESCALATE_S (60)
    CHIEF_TEST_URGENT_SHORT unset  TEST ONLY: `1` lets the interval go down to
                                   TEST_MIN_RERING_S (0.2 s), the expiry with it, and the
                                   escalation to TEST_MIN_ESCALATE_S, so the test suite sees
                                   repeats, rungs and expiries in seconds; never set it in
                                   production (the door logs `door.urgent_test_bounds` at start)

So one report rings the owner at most `floor(expire_s / rering_s) + 1` times (60 at the defaults,
where the ring due at the expiry itself does not ring: the expiry comes first), and
the second person once (rung 2), when one is paired and nobody acknowledged it within
`escalate_s`.

The ladder. Rung 1 is the owner's chat, repeated; rung 2 the second person's chat (one ring, a
"Got it" of the same report); rung 3 (the fallback channel) is another module's. The first
acknowledgement anywhere stops every rung, and says who (`WHO`): the owner, the second person,
`chief ack` on the machine, or the settle of its request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo

from chief.errors import DoorError
from plumbing import settings

DEFAULT_RERING_S = 60.0
DEFAULT_EXPIRE_S = 3600.0
# Pushover's emergency priority: at least 30 s between repeats, at most 3 h of them.
MIN_RERING_S = 30.0
MAX_EXPIRE_S = 3 * 3600.0
TEST_MIN_RERING_S = 0.2
TEST_SETTING = "CHIEF_TEST_URGENT_SHORT"
DEFAULT_ESCALATE_S = 600.0
MIN_ESCALATE_S = 60.0
TEST_MIN_ESCALATE_S = 0.5

# The rungs of the ladder (the number kept per report in chief.db).
OWNER_RUNG = 1
SECOND_RUNG = 2
#: rung 3: the fallback channel (chief.fallback), once Telegram has failed for its delay
FALLBACK_RUNG = 3
# Who acknowledged, as chief.db keeps it (`urgent_reports.acked_by`), and as the Chief line and
# the edited messages name them.
OWNER, SECOND, MACHINE, SETTLE = "owner", "second", "machine", "settle"
WHO = {
    OWNER: "the owner",
    SECOND: "the second person",
    MACHINE: "chief ack on the machine",
    SETTLE: "the answer to its request",
}
# `chief ack N`'s route on the door (`chief.door.ack_route`), and the longest N or key it takes.
ACK_PATH = "/api/chief/urgent/ack"
MAX_REFERENCE_CHARS = 200
# A tap on a request's choice by the second person: deciding stays the owner's.
SECOND_MAY_NOT_DECIDE = "Only the owner decides requests; tap Got it to acknowledge an urgent one"

# Words the other parts match on (the contract): keep them.
GOT_IT = "Got it"
URGENT_MARK = "URGENT: "
# A "Got it" token: opaque and random like an ask button's (`b-`), never an id.
GOT_IT_PREFIX = "g-"
# The Chief line of an acknowledgement and of an expiry: their report source ids, after the
# row's own `coop-notify:<outbox id>` ("#" never appears in an outbox id, so none collides).
ACK_SOURCE_SUFFIX = "#urgent-ack"
EXPIRED_SOURCE_SUFFIX = "#urgent-expired"
# The previous ring's message, once a newer one rings: its text gets this, its buttons go.
RUNG_AGAIN_NOTE = "(rung again below)"


@dataclass(frozen=True)
class UrgentBounds:
    """How often an urgent report rings again, and for how long (seconds)."""

    rering_s: float = DEFAULT_RERING_S
    expire_s: float = DEFAULT_EXPIRE_S
    #: the test-only setting allowed the short bounds
    test_short: bool = False
    #: when an unacknowledged report climbs to rung 2 (the second person), after it was accepted
    escalate_s: float = DEFAULT_ESCALATE_S

    @property
    def max_rings(self) -> int:
        """The most rings one report can make: the first and one per interval until expiry."""
        return math.floor(self.expire_s / self.rering_s) + 1


def bounds_from_env(env: Mapping[str, str]) -> UrgentBounds:
    """The urgent bounds from the environment; `DoorError` naming the wrong setting."""
    test_short = _test_short(env)
    floor = TEST_MIN_RERING_S if test_short else MIN_RERING_S
    rering_s = _seconds(env, "CHIEF_URGENT_RERING_S", DEFAULT_RERING_S)
    if rering_s < floor:
        raise DoorError(
            f"CHIEF_URGENT_RERING_S={rering_s:g} is below {floor:g} s: an urgent report rings "
            f"again at most every {MIN_RERING_S:g} s (the test-only {TEST_SETTING}=1 allows "
            f"{TEST_MIN_RERING_S:g} s, for the test suite)"
        )
    expire_s = _seconds(env, "CHIEF_URGENT_EXPIRE_S", DEFAULT_EXPIRE_S)
    if not rering_s <= expire_s <= MAX_EXPIRE_S:
        raise DoorError(
            f"CHIEF_URGENT_EXPIRE_S={expire_s:g} must lie between CHIEF_URGENT_RERING_S "
            f"({rering_s:g}) and {MAX_EXPIRE_S:g} s (3 h)"
        )
    escalate_floor = TEST_MIN_ESCALATE_S if test_short else MIN_ESCALATE_S
    escalate_s = _seconds(env, "CHIEF_ESCALATE_AFTER_S", DEFAULT_ESCALATE_S)
    if escalate_s < escalate_floor:
        raise DoorError(
            f"CHIEF_ESCALATE_AFTER_S={escalate_s:g} is below {escalate_floor:g} s: an urgent "
            f"report reaches the second person after at least {MIN_ESCALATE_S:g} s (the "
            f"test-only {TEST_SETTING}=1 allows {TEST_MIN_ESCALATE_S:g} s, for the test suite)"
        )
    return UrgentBounds(rering_s, expire_s, test_short, escalate_s)


#: The words the test-only switch takes (docs/configuration.md); unset or blank is off.
TEST_SETTING_WORDS = {"1": True, "0": False}


def _test_short(env: Mapping[str, str]) -> bool:
    try:
        return settings.switch_setting(env, TEST_SETTING, TEST_SETTING_WORDS, default=False)
    except settings.SettingRefused as exc:
        raise DoorError(exc.message) from None


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    read = settings.decimal(raw)  # ASCII digits only: `٣٠` is refused, never read as 30
    value = math.nan if read is None else read
    if not math.isfinite(value) or value <= 0:
        raise DoorError(f"{name}={raw!r} must be a positive number of seconds")
    return value


# Why an urgent request stopped ringing unacknowledged before its expiry.
DEADLINE_DECIDED = "its deadline decided it with no answer"


def first_line(text: str) -> str:
    """The first line of a report, for the acknowledgement's and the expiry's lines."""
    return text.strip().splitlines()[0] if text.strip() else text


def marked(text: str, limit: int) -> str:
    """A report's text marked urgent (its Chief line and its first ring), within `limit`."""
    line = URGENT_MARK + text
    return line if len(line) <= limit else line[: limit - 1] + "…"


def waited_min(created_at: float, now: float) -> int:
    """Whole minutes an urgent report has waited."""
    return max(0, int((now - created_at) // 60))


def repeat_text(ring: int, created_at: float, now: float, text: str) -> str:
    """A repeat's text: `URGENT, again (ring 3, waiting 2 min): <the report>`."""
    return f"URGENT, again (ring {ring}, waiting {waited_min(created_at, now)} min): {text}"


def escalated_text(created_at: float, now: float, text: str) -> str:
    """Rung 2's ring, in the second person's chat: `URGENT, nobody acknowledged it for 10 min:
    <the report>` (the owner's chat still rings)."""
    return f"URGENT, nobody acknowledged it for {waited_min(created_at, now)} min: {text}"


def acknowledged_line(
    at: float, rings: int, text: str, zone: tzinfo | None = None, *, by: str = OWNER
) -> str:
    """The Chief line of an acknowledgement: `acknowledged at 14:05 by the owner (after 3
    rings): ...` (the contract's words, "rings" whatever the count; `by` a key of `WHO`)."""
    clock = datetime.fromtimestamp(at, zone).strftime("%H:%M")
    return f"acknowledged at {clock} by {WHO[by]} (after {rings} rings): {first_line(text)}"


def expired_line(rings: int, created_at: float, now: float, text: str, why: str = "") -> str:
    """The Chief line of an expiry: `went unacknowledged after 60 rings in 60 min: ...`, `why`
    after the report's first line when it stopped for a reason (`DEADLINE_DECIDED`)."""
    minutes = waited_min(created_at, now)
    line = f"went unacknowledged after {rings} rings in {minutes} min: {first_line(text)}"
    return f"{line} ({why})" if why else line


def ack_toast(already: bool, at: float, zone: tzinfo | None = None) -> str:
    """The toast of a "Got it" tap."""
    clock = datetime.fromtimestamp(at, zone).strftime("%H:%M")
    if already:
        return f"Already acknowledged (at {clock})"
    return f"Acknowledged at {clock}: it stops ringing"
