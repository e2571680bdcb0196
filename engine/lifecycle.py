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
    from typing import Any, Literal

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
#: A request to the owner may offer 1 to this many answers, each a short label (one button
#: each on the phone; a Telegram button's data is an opaque token, its label is this text).
MAX_CHOICES = 4
MAX_CHOICE_CHARS = 24
#: A text answer from the phone, as long as a notification may be.
MAX_ANSWER_CHARS = MAX_TEXT_CHARS
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


# ---- requests the owner answers from the phone (issue 21) ---------------------------------


def _control(text: str) -> bool:
    """A C0 or C1 control character, or DEL (Unicode's category Cc, without `unicodedata`)."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def require_choices(raw: str | None, addressed_to: str | None, owner: str) -> list[str] | None:
    """The labels of `--choices a,b` (None when not given), or refuse in one line naming the
    bad label: 1 to `MAX_CHOICES` labels, each 1 to `MAX_CHOICE_CHARS` characters once its
    surrounding spaces are dropped, with no control character, unique ignoring case, and only
    on a request addressed to the owner (only the owner's phone shows the buttons)."""
    if raw is None:
        return None
    if addressed_to != owner:
        whom = f"to {addressed_to}" if addressed_to else "to anyone"
        raise UsageError(
            f"--choices is only for a request to the owner ({owner}); this one is {whom}:"
            f" add --to {owner}, or drop --choices"
        )
    # Plain spaces only: `str.strip()` would also drop control characters (NEL, the C0
    # separators), which are refused below instead.
    labels = [label.strip(" ") for label in raw.split(",")]
    given = 0 if labels == [""] else len(labels)
    if not 1 <= given <= MAX_CHOICES:
        raise UsageError(
            f"--choices takes 1 to {MAX_CHOICES} labels separated by commas"
            f" (approve,decline), not {given}"
        )
    seen: dict[str, str] = {}
    for number, label in enumerate(labels, start=1):
        if not label:
            raise UsageError(f"choice {number} is empty: separate labels with single commas")
        if _control(label):
            raise UsageError(f"choice {label!r} has a control character: use plain text")
        if len(label) > MAX_CHOICE_CHARS:
            raise UsageError(
                f"choice {label!r} is {len(label)} characters; keep each to {MAX_CHOICE_CHARS}"
            )
        folded = label.casefold()
        if folded in seen:
            raise UsageError(
                f"choice {label!r} repeats {seen[folded]!r}: choices differ by more than case"
            )
        seen[folded] = label
    return labels


def ask_text(request_id: int, actor: str, title: str, choices: list[str] | None) -> str:
    """The line the owner reads when a request to them is filed:
    `request #7 from agent: order the bigger bag? (approve / decline)`."""
    text = f"request #{request_id} from {actor}: {title}"
    return text + (f" ({' / '.join(choices)})" if choices else " (reply to answer)")


def ask_extra(
    request_id: int, ask_key: str, title: str, choices: list[str] | None
) -> dict[str, Any]:
    """The outbox row's extra for a request filed to the owner: the door rings it alone, with
    one button per choice (none: the owner answers with a text reply), and knows it by its ask
    key (`key`), never by its id alone."""
    return {
        "ask": {
            "request_id": request_id,
            "key": ask_key,
            "title": title,
            "choices": list(choices or []),
        }
    }


def settles_extra(request_id: int, ask_key: str, *, ring: bool = True) -> dict[str, Any]:
    """The outbox row's extra for an asked request closed or abandoned: the door voids the
    buttons of that ask (by its key) and edits its message. `ring=False`: the owner's own
    answer from the phone, which lands in the Chief's conversation and never rings back."""
    settles = {"settles": {"request_id": request_id, "key": ask_key}}
    return settles | ({} if ring else {"ring": False})


def require_answer_text(text: str) -> str:
    """A text answer from the phone: 1 to `MAX_ANSWER_CHARS` characters, not blank, and no
    NUL (refused as the CLI refuses it in an argument; the door refuses it first)."""
    if not text.strip():
        raise UsageError("the answer is empty: say something")
    if "\x00" in text:
        raise UsageError("the answer holds a NUL character: send it again without it")
    if len(text) > MAX_ANSWER_CHARS:
        raise UsageError(f"the answer is {len(text)} characters; keep it to {MAX_ANSWER_CHARS}")
    return text.strip()


def match_choice(choice: str, choices: list[str]) -> str | None:
    """The request's own label for `choice` (compared ignoring case), or None."""
    folded = choice.strip().casefold()
    return next((label for label in choices if label.casefold() == folded), None)


def closed_how(payload: dict[str, Any] | None) -> str:
    """How a closing event came: `from Telegram` (its payload says so) or `at a terminal`."""
    return "from Telegram" if (payload or {}).get("via") == "telegram" else "at a terminal"


def one_line(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters (a toast shows one short line)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
