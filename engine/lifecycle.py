"""The two lifecycles as data, and the words of every refusal. No I/O here.

    todos     open --take--> taken --release(reason)--> open
              open|taken --done--> done          (open -> done is the legal fast path)
              open|taken --abandon(reason)--> abandoned
    requests  open --take--> taken --release--> open
              open|taken --close--> closed       (open -> closed is the fast path)
    done|closed --done/close again--> same state, same closer: an 'edit' of the outcome

Status is plain TEXT; these tables are the rules the verbs in `engine.verbs` consult.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from engine.errors import LifecycleError, UsageError

# `typing` stays off the CLI's cold path (~7 ms): for mypy only, which reads any
# `TYPE_CHECKING` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    Kind = Literal["todo", "request"]

TABLES: dict[str, str] = {"todo": "todos", "request": "requests"}

#: verb -> (states it may start from, state it ends in), per lifecycle.
MOVES: dict[str, dict[str, tuple[frozenset[str], str]]] = {
    "todo": {
        "take": (frozenset({"open", "taken"}), "taken"),
        "release": (frozenset({"taken"}), "open"),
        "done": (frozenset({"open", "taken"}), "done"),
        "abandon": (frozenset({"open", "taken"}), "abandoned"),
    },
    "request": {
        "take": (frozenset({"open", "taken"}), "taken"),
        "release": (frozenset({"taken"}), "open"),
        "close": (frozenset({"open", "taken"}), "closed"),
    },
}

TERMINAL: frozenset[str] = frozenset({"done", "abandoned", "closed"})
#: The verb whose repeat on a finished row amends its outcome instead of moving it.
CLOSING_VERB: dict[str, str] = {"todo": "done", "request": "close"}

MAX_TITLE_CHARS = 500
# The door refuses longer text (chief.model.MAX_TEXT_CHARS, a twin pinned by
# tests/contract/test_shared_facts.py), so the cut happens here, at write time.
MAX_TEXT_CHARS = 4000
KIND_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
ACTOR_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}")


def check_move(kind: str, item_id: int, verb: str, status: str) -> str:
    """Return the state `verb` leads to from `status`, or refuse in the lifecycle's words."""
    allowed, target = MOVES[kind][verb]
    if status in allowed:
        return target
    if status in TERMINAL:
        if verb == "take":
            raise LifecycleError(
                f"{kind} #{item_id} is {status!r} — terminal rows are never re-taken"
            )
        raise LifecycleError(
            f"{kind} #{item_id} is {status!r} — a terminal row cannot be {past(verb)}"
        )
    raise LifecycleError(
        f"{kind} #{item_id} is {status!r} — only a {' or '.join(sorted(allowed))} {kind}"
        f" can be {past(verb)}"
    )


def past(verb: str) -> str:
    return {
        "take": "taken",
        "release": "released",
        "done": "marked done",
        "abandon": "abandoned",
        "close": "closed",
    }[verb]


def require_actor(actor: str | None) -> str:
    if not actor or not actor.strip():
        raise UsageError("no actor: pass --as NAME or set COOP_ACTOR")
    actor = actor.strip()
    if not ACTOR_PATTERN.fullmatch(actor):
        raise UsageError(
            f"actor {actor!r} is not accepted: use 1-64 letters, digits or _.@:- (no spaces)"
        )
    return actor


def require_title(title: str | None) -> str:
    if title is None or not title.strip():
        raise UsageError("the title is empty: say what the work is")
    title = title.strip()
    if len(title) > MAX_TITLE_CHARS:
        raise UsageError(
            f"the title is {len(title)} characters; keep it to {MAX_TITLE_CHARS}"
            " and put the rest in --body"
        )
    return title


def require_reason(reason: str | None, verb: str) -> str:
    if reason is None or not reason.strip():
        raise UsageError(f"{verb} needs a reason: pass --reason TEXT")
    return reason.strip()


def require_kind(kind: str | None) -> str:
    if kind is None or not KIND_PATTERN.fullmatch(kind):
        raise UsageError(
            f"notification kind {kind!r} is not accepted: use 1-64 lowercase letters, digits"
            " or _.- (for example: note)"
        )
    return kind


def cut_text(text: str) -> str:
    """Fit a notification into the door's limit at write time, with a visible marker."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    marker = f"\n[… cut by coop: {len(text)} characters, the first %d shown]"
    keep = MAX_TEXT_CHARS - len(marker % MAX_TEXT_CHARS)
    return text[:keep] + marker % keep


def ago(since_iso: str, now: datetime | None = None) -> str:
    """`5h ago` / `12m ago` / `40s ago` for a stored UTC timestamp."""
    then = datetime.strptime(since_iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    if seconds >= 86400:
        return f"{seconds // 86400}d ago"
    if seconds >= 3600:
        return f"{seconds // 3600}h ago"
    if seconds >= 60:
        return f"{seconds // 60}m ago"
    return f"{seconds}s ago"


def clock(since_iso: str) -> str:
    """`2026-11-29 09:14 UTC` for refusal messages naming since when."""
    return since_iso[:10] + " " + since_iso[11:16] + " UTC"
