"""The pure part of the Chief: what a report key, a turn kind and a message may be. No I/O.

A report's source id names where the line came from, and its prefix decides how the conversation
draws it: `coop-notify:<outbox id>` lands as a `coop` line, `cron:<job>` as a `cron` line. Both
are assistant rows with origin `scheduled_task`, never a turn of the assistant's own.
"""

from __future__ import annotations

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
# The longest report text chief carries: the door refuses longer (chief.door.router,
# chief.door.report_route) and so does `chief report` (chief.cron). Twin of
# engine.lifecycle.MAX_TEXT_CHARS, pinned by tests/contract/test_shared_facts.py.
MAX_TEXT_CHARS = 4000

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
