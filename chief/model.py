"""The pure part of the Chief: what a report key, a turn kind and a message may be. No I/O.

A report's source id names where the line came from, and its prefix decides how the conversation
draws it: `coop-notify:<outbox id>` lands as a `coop` line, `cron:<job>` as a `cron` line. Both
are assistant rows with origin `scheduled_task`, never a turn of the assistant's own.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from chief.errors import ChiefInputError

TurnKind = Literal["chat", "coop", "cron"]
Origin = Literal["user", "scheduled_task"]
Role = Literal["user", "assistant", "system"]

TURN_KINDS: tuple[TurnKind, ...] = ("chat", "coop", "cron")
ORIGINS: tuple[Origin, ...] = ("user", "scheduled_task")
ROLES: tuple[Role, ...] = ("user", "assistant", "system")

REPORT_KEY_PREFIX = "chief-report:"
# Source-id prefix -> the turn kind its line lands with.
SOURCE_PREFIX_TURN_KIND: dict[str, TurnKind] = {"coop-notify:": "coop", "cron:": "cron"}
SOURCE_ID_MAX_CHARS = 200

# How `chief log` marks lines that are not the assistant's own reply.
BADGES: dict[str, str] = {"chat": "", "coop": "[coop]", "cron": "[cron]"}


@dataclass(frozen=True)
class Message:
    """One stored row of the conversation, as the store reads it back."""

    id: int
    role: str
    content: str
    turn_kind: str
    origin: str
    external_request_id: str | None
    created_at: str


def _accepted_sources() -> str:
    return " or ".join(f"'{prefix}<id>'" for prefix in SOURCE_PREFIX_TURN_KIND)


def turn_kind_for_source(source_id: str) -> TurnKind:
    """The turn kind a report from `source_id` lands with; ChiefInputError for anything else."""
    if not isinstance(source_id, str) or len(source_id) > SOURCE_ID_MAX_CHARS:
        raise ChiefInputError(
            f"report source id must be a string of at most {SOURCE_ID_MAX_CHARS} characters, "
            f"like {_accepted_sources()}"
        )
    for prefix, kind in SOURCE_PREFIX_TURN_KIND.items():
        if source_id.startswith(prefix) and source_id[len(prefix) :].strip():
            return kind
    raise ChiefInputError(
        f"unknown report source {source_id!r} — a source id is {_accepted_sources()} "
        "(a Coop outbox row or a scheduled job), with a non-empty id after the colon"
    )


def report_key(source_id: str) -> str:
    """The outbox key and external request id of a report: 'chief-report:' + source id."""
    turn_kind_for_source(source_id)
    return REPORT_KEY_PREFIX + source_id


def turn_kind_for_key(key: str) -> TurnKind:
    """The turn kind of an outbox row, from its stored key (the drainer's rule)."""
    return turn_kind_for_source(key.removeprefix(REPORT_KEY_PREFIX))


def check_report_text(text: str) -> str:
    """A report line must carry something to read; returned unchanged when it does."""
    if not isinstance(text, str) or not text.strip():
        raise ChiefInputError("report text is empty — pass the line the owner should read")
    return text


def check_message(role: str, content: str, turn_kind: str, origin: str) -> None:
    """Validate a host-appended message; ChiefInputError names the field and what it accepts."""
    for field, value, accepted in (
        ("role", role, ROLES),
        ("turn_kind", turn_kind, TURN_KINDS),
        ("origin", origin, ORIGINS),
    ):
        if value not in accepted:
            raise ChiefInputError(f"{field}={value!r} is not accepted — use one of {accepted}")
    if not isinstance(content, str):
        raise ChiefInputError("message content must be text")


# An ask's choices (issue 21, the notify extras): 0 to 4 labels of 1 to 24 characters, no
# control character (Unicode's Cc), no comma, unique ignoring case. Twin of the engine's
# `--choices` rule (`engine.lifecycle.require_choices`, which also drops surrounding spaces
# and wants at least one label), pinned by tests/contract/test_shared_facts.py: a label the
# engine files, the door must take, or the row would be refused for ever.
MAX_CHOICES = 4
MAX_CHOICE_CHARS = 24
# An ask key (issue 21): the ledger's random identity of one question put to the owner's phone
# (`q-` + 32 hex digits, drawn with the request; twin of `engine.store.schema.ASK_KEY_PREFIX`
# and the engine's answer route, pinned by tests/contract/test_shared_facts.py). The door keys
# everything about an ask by it: a request's id comes back (a fresh coop.db, a restored
# backup, a second ledger behind the same door), its ask key never does.
ASK_KEY_PATTERN = r"^q-[0-9a-f]{32}$"


@dataclass(frozen=True)
class Ask:
    """A notify row that files a request to the owner: ring it alone, one button per choice (no
    choices: a request a text reply answers). `key` is the question's ask key, what the door
    knows it by; `request_id` is for the words."""

    request_id: int
    key: str
    title: str
    choices: tuple[str, ...] = ()
    #: issue 28: when the ledger decides it (epoch seconds), with `default` (None: abandoned)
    deadline_at: float | None = None
    default: str | None = None
    #: issue 28: ring it again every `remind.every_s` while open, at most `remind.max` times
    remind: Remind | None = None


@dataclass(frozen=True)
class Remind:
    """An ask's reminders: every `every_s` seconds after it first rang, at most `max` of them."""

    every_s: float
    max: int


@dataclass(frozen=True)
class Settle:
    """A notify row's `settles`: the ask `key` (request `request_id`) is closed or abandoned;
    `by` is "deadline" when its deadline decided it (`outcome` closed with `choice`, or
    abandoned), else None."""

    request_id: int
    key: str
    by: str | None = None
    outcome: str | None = None
    choice: str | None = None


@dataclass(frozen=True)
class Amend:
    """A notify row's `amends` (issue 34): the settled ask `key` (request `request_id`) had its
    outcome amended; the row's text says how."""

    request_id: int
    key: str


@dataclass(frozen=True)
class Extras:
    """A notify row's optional extras: `ask` (it files a request), `settles` (it reports the ask
    with that key closed or abandoned: void its buttons, edit its ask message), `ring`
    (False: the Chief line only, nothing for Telegram), `urgent` (ring it loud until the
    owner acknowledges it: chief.urgent_rules) and `amends` (the settled ask's outcome was
    amended: its message edited to show it)."""

    ask: Ask | None = None
    settles: Settle | None = None
    ring: bool = True
    urgent: bool = False
    amends: Amend | None = None


NO_EXTRAS = Extras()


def choice_refusal(label: str) -> str | None:
    """Why `label` cannot be a choice, or None when it can."""
    if not 1 <= len(label) <= MAX_CHOICE_CHARS:
        return f"a choice is 1 to {MAX_CHOICE_CHARS} characters"
    if "," in label:
        return "a choice has no comma"
    if any(unicodedata.category(char) == "Cc" for char in label):
        return "a choice has no control character"
    return None


def choices_refusal(labels: list[str]) -> str | None:
    """Why `labels` cannot be an ask's choices, or None when they can."""
    if len(labels) > MAX_CHOICES:
        return f"an ask has at most {MAX_CHOICES} choices"
    for label in labels:
        if (refusal := choice_refusal(label)) is not None:
            return f"{label!r}: {refusal}"
    folded = [label.casefold() for label in labels]
    if len(set(folded)) != len(folded):
        return "the choices must differ (ignoring case)"
    return None


# A duration's units, short (/status: `2h 5m`) and spelled out (a reminder: `2 h 5 min`).
SHORT_UNITS = ("s", "m", "h", "d")
SPELLED_UNITS = (" s", " min", " h", " d")


def span(seconds: float, units: tuple[str, str, str, str] = SHORT_UNITS) -> str:
    """A duration as the owner reads it: 45s, 12m, 2h 5m, 3d 4h (in `units`)."""
    s, m, h, d = units
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}{s}"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}{m}"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}{h} {minutes}{m}" if minutes else f"{hours}{h}"
    days, hours = divmod(hours, 24)
    return f"{days}{d} {hours}{h}" if hours else f"{days}{d}"
