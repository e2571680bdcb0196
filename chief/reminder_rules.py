"""The rules of an ask's deadline and reminders on the phone (issue 28): pure (no I/O; the clock
and the time zone come in as arguments), a leaf every layer may use.

    the ask's text        its own text, then `if no answer by 18:00: decline` (or `...:
                          abandoned`); the time in the door's local time, a day named when not
                          today
    a reminder's text     `Reminder 2 of 3: request #5 "pay the plumber" has waited 1 h 30 min`,
                          then the deadline's line when there is one; it starts with `Reminder`
                          (other parts match on that word)
    the schedule          the first reminder `every_s` after the ask first rang; each next one
                          `every_s` after the last rang; none past `max`, none at or after the
                          deadline (`next_due`)
    a late tap's toast    `The deadline decided this at 18:00: decline` (`deadline_toast`)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from chief.model import SPELLED_UNITS, span

# The first word of every reminder's text: the other parts (the power-cut run, the tests)
# count reminders by it.
REMINDER_WORD = "Reminder"
# Between the ask's own text and its deadline's line.
DEADLINE_SEPARATOR = "\n"


@dataclass(frozen=True)
class Deadline:
    """When the ledger decides an ask (epoch seconds) and with what (None: abandoned)."""

    at: float
    default: str | None = None


def local(at: float, zone: tzinfo | None) -> datetime:
    """The instant `at` (epoch seconds) in `zone` (None: the machine's local time)."""
    return datetime.fromtimestamp(at, UTC).astimezone(zone)


def clock_time(at: float, now: float, zone: tzinfo | None = None) -> str:
    """`18:00` when `at` falls on the same local day as `now`, else `Tue 18:00` within the
    week ahead, else `Tue 12 Jan 18:00`."""
    when, today = local(at, zone), local(now, zone)
    hour = when.strftime("%H:%M")
    if when.date() == today.date():
        return hour
    if 0 < (when.date() - today.date()).days < 7:
        return f"{when.strftime('%a')} {hour}"
    return f"{when.strftime('%a')} {when.day} {when.strftime('%b')} {hour}"


def deadline_line(deadline: Deadline, now: float, zone: tzinfo | None = None) -> str:
    """What the ask says of its deadline: `if no answer by 18:00: decline` (the default named
    after the words, so a choice named `no` reads as one)."""
    what = deadline.default if deadline.default is not None else "abandoned"
    return f"if no answer by {clock_time(deadline.at, now, zone)}: {what}"


def with_deadline(
    text: str, deadline: Deadline | None, now: float, zone: tzinfo | None = None
) -> str:
    """An ask's text as the phone shows it: its own, then its deadline's line when it has one."""
    if deadline is None:
        return text
    return text + DEADLINE_SEPARATOR + deadline_line(deadline, now, zone)


def waited(seconds: float) -> str:
    """How long a request has waited, as the owner reads it: `45 s`, `12 min`, `1 h 30 min`,
    `2 d 3 h`."""
    return span(seconds, SPELLED_UNITS)


@dataclass(frozen=True)
class DueReminder:
    """One reminder due now, as the schedule holds it."""

    ask_key: str
    request_id: int
    title: str
    number: int  # this reminder's number, from 1
    max: int
    every_s: float
    first_rang_at: float  # when the ask first rang (epoch seconds): its wait starts there
    due_at: float
    deadline: Deadline | None = None
    #: the ask (or its last reminder) is still on the Telegram queue, not rung yet
    still_queued: bool = False


def reminder_text(due: DueReminder, now: float, zone: tzinfo | None = None) -> str:
    """`Reminder 2 of 3: request #5 "pay the plumber" has waited 1 h 30 min`, then the
    deadline's line when there is one."""
    text = (
        f"{REMINDER_WORD} {due.number} of {due.max}: request #{due.request_id} "
        f'"{due.title}" has waited {waited(now - due.first_rang_at)}'
    )
    return with_deadline(text, due.deadline, now, zone)


def next_due(rung: int, max_rings: int, after: float, every_s: float, deadline_at: float | None
) -> float | None:  # fmt: skip
    """When the next reminder falls due once `rung` have rung, the last at `after` (or the ask
    first rang then): `every_s` later, or None when `max_rings` have rung or it would fall at
    or after the deadline."""
    if rung >= max_rings:
        return None
    at = after + every_s
    if deadline_at is not None and at >= deadline_at:
        return None
    return at


def deadline_toast(
    deadline_at: float | None,
    outcome: str,
    choice: str | None,
    now: float,
    zone: tzinfo | None = None,
) -> str:
    """A late tap's toast on an ask its deadline decided: `The deadline decided this at 18:00:
    decline` (or `abandoned`)."""
    what = choice if outcome == "closed" and choice is not None else outcome
    when = "" if deadline_at is None else f" at {clock_time(deadline_at, now, zone)}"
    return f"The deadline decided this{when}: {what}. Nothing was changed."
