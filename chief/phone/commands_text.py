"""The pure part of the phone's commands: what the owner may type, and every word the phone answers.
No I/O; the clock comes in as an argument (unix seconds).

    /status      open todos and requests, the oldest pending item, delivery health (the
                 engine's outbox from its summary, the door's own Telegram queue and refusal);
                 without the ledger service, says so in plain words and still shows the queue
    /todos       the open todos
    /requests    the open requests (those to the owner with choices are rung again, with their
                 buttons, where the door can)
    /quiet 2h    silent delivery for 1m..24h (30m, 2h, 90m); /quiet off; /quiet alone: the state
                 (both name the quiet hours, TELEGRAM_QUIET_HOURS, and whether they hold now)
    /help        the commands
    /start       once paired: "already paired"
    anything else that starts with '/' (an unknown name, or no name: `/`, `/über`): the help's
                 first line

Every answer is plain text, short, and well within Telegram's 4,096 characters: at most
`MAX_LISTED` items a list, each title cut to `MAX_TITLE_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chief.model import span
from chief.phone.pacing import QuietHours

#: (command, description) as setMyCommands registers them (Telegram's menu)
COMMANDS: tuple[tuple[str, str], ...] = (
    ("status", "Open items, the oldest one, delivery health"),
    ("todos", "List the open todos"),
    ("requests", "List the open requests"),
    ("quiet", "Silent messages for a while: /quiet 2h, /quiet off"),
    ("help", "What I answer to"),
)
HELP_FIRST_LINE = "I answer /status, /todos, /requests, /quiet 2h, /quiet off and /help."
HELP = "\n".join(
    [
        HELP_FIRST_LINE,
        "/status: open items, the oldest one, delivery health",
        "/todos, /requests: the open items",
        "/quiet 2h: messages arrive silently for 2 hours (1m to 24h); /quiet off ends it",
        "Tap a request's button, or reply to its message, to answer it.",
    ]
)
ALREADY_PAIRED = "Already paired: this chat gets the household's reports. /help lists commands."
# The second person (issue 35): what they may run, and the answer to anything else.
SECOND_COMMANDS = frozenset({"status", "help", "start"})
OWNERS_ONLY = (
    "Only the owner can do that. Here you may run /status and /help, and tap Got it on an "
    "urgent report (or reply to it) to acknowledge it."
)
NOT_RUNNING = "The ledger service (coop serve) is not running, so I cannot read the ledger now."
NOT_ANSWERING = "The ledger service (coop serve) did not answer in time; try again in a minute."

QUIET_MIN_S = 60
QUIET_MAX_S = 24 * 3600
QUIET_REFUSAL = "Say /quiet 30m or /quiet 2h (1m to 24h), /quiet off, or /quiet alone."
MAX_LISTED = 10
MAX_TITLE_CHARS = 80
_COMMAND = re.compile(r"/([A-Za-z0-9_]{1,32})(?:@[A-Za-z0-9_]{1,64})?")
_DURATION = re.compile(r"([0-9]{1,4})\s*(m|min|mins|minutes?|h|hr|hrs|hours?)")


@dataclass(frozen=True)
class Command:
    """A command line the owner sent: its name (lower case, no slash, no @bot) and the rest."""

    name: str
    argument: str


def parse_command(text: str) -> Command | None:
    """`/name[@bot] rest` as a Command (the name ends at any white space: a tab, a new line, a
    no-break space); None when `text` is not a command."""
    head, *rest = text.split(maxsplit=1) or [""]
    match = _COMMAND.fullmatch(head)
    if match is None:
        return None
    return Command(match[1].lower(), rest[0].strip() if rest else "")


@dataclass(frozen=True)
class QuietAsk:
    """What `/quiet ARG` asks: `show` the state, `off`, `for_s` seconds, or a `refusal` line."""

    show: bool = False
    off: bool = False
    for_s: int | None = None
    refusal: str | None = None


def parse_quiet(argument: str) -> QuietAsk:
    """`` (show), `off`, or a duration in minutes or hours within 1m..24h."""
    words = argument.strip().lower()
    if not words:
        return QuietAsk(show=True)
    if words == "off":
        return QuietAsk(off=True)
    match = _DURATION.fullmatch(words)
    if match is None:
        return QuietAsk(refusal=QUIET_REFUSAL)
    seconds = int(match[1]) * (3600 if match[2].startswith("h") else 60)
    if not QUIET_MIN_S <= seconds <= QUIET_MAX_S:
        return QuietAsk(refusal=QUIET_REFUSAL)
    return QuietAsk(for_s=seconds)


class QuietOverride:
    """The owner's /quiet, held in memory for the sender task (chief.db keeps it across
    restarts): silent delivery while it holds, beside the quiet hours."""

    def __init__(self, until: float | None = None) -> None:
        #: unix seconds it holds until; None: off
        self.until = until

    def holds(self, now: float) -> bool:
        return self.until is not None and now < self.until


def quiet_state(until: float | None, now: float, hours: QuietHours | None = None) -> str:
    """/quiet alone: the owner's /quiet, then the quiet hours when they are set."""
    if until is None or now >= until:
        return quiet_off(now, hours)
    left = span(until - now)
    line = f"Quiet is on: messages arrive silently for {left} more. /quiet off ends it."
    return line if hours is None else f"{line}\n{quiet_hours_line(hours, now)}"


def quiet_set(seconds: int) -> str:
    return f"Quiet for {span(seconds)}: messages arrive silently. /quiet off ends it."


def quiet_off(now: float, hours: QuietHours | None = None) -> str:
    """/quiet off's answer (and /quiet alone's when off): what rings now, quiet hours named."""
    if hours is None:
        return "Quiet is off: messages ring as usual."
    if hours.in_force(now):
        return (
            f"Quiet is off, but the quiet hours {hours.named()} are in force now: messages arrive"
            f" silently until {hours.end:%H:%M}."
        )
    return f"Quiet is off: messages ring as usual. {quiet_hours_line(hours, now)}"


def quiet_hours_line(hours: QuietHours, now: float) -> str:
    """The quiet hours (TELEGRAM_QUIET_HOURS) and whether they hold now, in one line."""
    if hours.in_force(now):
        return f"Quiet hours: {hours.named()}, in force now (silent until {hours.end:%H:%M})."
    return f"Quiet hours: {hours.named()}, not in force now (from {hours.start:%H:%M})."


def _title(text: object) -> str:
    words = " ".join(str(text).split())
    return words if len(words) <= MAX_TITLE_CHARS else words[: MAX_TITLE_CHARS - 1] + "…"


def _item_line(kind: str, item: Mapping[str, Any]) -> str:
    line = f"{kind} #{item.get('id')} {_title(item.get('title', ''))}"
    taken = item.get("taken_by")
    if item.get("status") == "taken" and taken:
        line += f" (taken by {taken})"
    choices = item.get("choices")
    if choices:
        line += " [" + " / ".join(str(choice) for choice in choices) + "]"
    return line


def item_list(kind: str, section: Mapping[str, Any], *, skip: Sequence[int] = ()) -> str:
    """`section` ({"open": n, "items": [...]}) as lines: a count, then up to MAX_LISTED items
    (those in `skip` left out: they were just rung again with their buttons)."""
    count = int(section.get("open", 0))
    plural = "" if count == 1 else "s"
    if count == 0:
        return f"No open {kind}s."
    items = [item for item in section.get("items", []) if item.get("id") not in skip]
    lines = [f"{count} open {kind}{plural}:"]
    if skip:
        asked = ", ".join(f"#{item_id}" for item_id in skip)
        lines.append(f"{asked}: asked again, with {'its' if len(skip) == 1 else 'their'}"
                     " buttons")  # fmt: skip
    lines += [_item_line(kind, item) for item in items[:MAX_LISTED]]
    shown = len(items[:MAX_LISTED]) + len(skip)
    if count > shown:
        lines.append(f"... and {count - shown} more")
    return "\n".join(lines)


def status_text(
    summary: Mapping[str, Any] | str | None,
    queue: Mapping[str, Any],
    *,
    quiet_until: float | None,
    now: float,
    quiet_hours: QuietHours | None = None,
) -> str:
    """/status: the ledger's part from its summary (None: the ledger service is not running; a
    line: why it has none), then the door's Telegram queue, the quiet override and the quiet
    hours."""
    lines = _ledger_lines(summary)
    lines.append(_telegram_line(queue))
    if quiet_until is not None and now < quiet_until:
        lines.append(f"Quiet: on for {span(quiet_until - now)} more.")
    if quiet_hours is not None:
        lines.append(quiet_hours_line(quiet_hours, now))
    return "\n".join(lines)


def _ledger_lines(summary: Mapping[str, Any] | str | None) -> list[str]:
    if summary is None:
        return [NOT_RUNNING]
    if isinstance(summary, str):
        return [summary]
    todos = int(summary.get("todos", {}).get("open", 0))
    requests = int(summary.get("requests", {}).get("open", 0))
    lines = [f"Open: {todos} todo{'' if todos == 1 else 's'}, {requests} request"
             f"{'' if requests == 1 else 's'}."]  # fmt: skip
    oldest = summary.get("oldest")
    if oldest:
        lines.append(
            f"Oldest: {oldest.get('kind')} #{oldest.get('id')} {_title(oldest.get('title', ''))}"
            f" ({span(float(oldest.get('age_s') or 0))} old)"
        )
    lines.append(_outbox_line(summary.get("outbox") or {}))
    return lines


def _outbox_line(outbox: Mapping[str, Any]) -> str:
    pending = int(outbox.get("pending", 0))
    if pending == 0:
        return "Notifications: none waiting."
    line = f"Notifications: {pending} waiting to be sent"
    age = outbox.get("oldest_pending_age_s")
    if age is not None:
        line += f", oldest {span(float(age))}"
    error = outbox.get("last_error")
    if error:
        line += f"; last error: {_title(error)}"
    return line + "."


def _telegram_line(queue: Mapping[str, Any]) -> str:
    refusal = queue.get("refusal")
    depth = int(queue.get("depth", 0))
    if depth == 0 and not refusal:
        return "Telegram queue: empty."
    line = f"Telegram queue: {depth} waiting"
    age = queue.get("oldest_age_s")
    if age is not None:
        line += f", oldest {span(float(age))}"
    if refusal:
        line += f"; Telegram refuses: {_title(refusal.get('answer', ''))}"
    elif queue.get("last_error"):
        line += f"; last error: {_title(queue['last_error'])}"
    return line + "."
