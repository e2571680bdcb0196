"""The two lifecycles as data, and the words of every refusal. No I/O here.

    todos     open --take--> taken --release(reason)--> open
              open|taken --done--> done          (open -> done is the legal fast path)
              open|taken --abandon(reason)--> abandoned
    requests  open --take--> taken --release--> open
              open|taken --close--> closed       (open -> closed is the fast path)
    done|closed --done/close again--> same state, same closer: an 'edit' of the outcome, by
              its closer or the owner (a stranger with --force); once the owner closed or
              amended it, anyone else's words are a 'note' beside it (`repeat_close`)

Status is plain TEXT; these tables are the rules the verbs in `engine.verbs` consult.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from engine.errors import LifecycleError, UsageError
from plumbing.bounds import MAX_WAIT_S, MIN_REMIND_S
from plumbing.wire import MAX_TEXT_CHARS

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
# The door refuses longer text (`plumbing.wire.MAX_TEXT_CHARS`), so the cut happens here, at
# write time.
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
                f"{kind} #{item_id} is {status} — terminal rows are never re-taken"
            )
        raise LifecycleError(
            f"{kind} #{item_id} is {status} — a terminal row cannot be {past(verb)}"
        )
    raise LifecycleError(
        f"{kind} #{item_id} is {status} — only a {' or '.join(sorted(allowed))} {kind}"
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


# ---- a repeat of the closing verb: amend, note or nothing (issue 34) -----------------------

#: The fields of a finished row's outcome a repeat of its closing verb may amend, as a person
#: names them.
OUTCOME_FIELDS: dict[str, str] = {"result_summary": "summary", "commit_sha": "commit"}
#: The events that set a finished row's outcome: its close (or done), and each amendment.
OUTCOME_EVENTS = frozenset({"close", "done", "edit"})


def owner_decided(owner: str, outcome_actors: list[str]) -> bool:
    """Whether the owner made the outcome: they closed the row or amended it (`outcome_actors`,
    who wrote each of its `OUTCOME_EVENTS`). From then on nobody else changes it."""
    return owner in outcome_actors


def repeat_close(
    kind: str, row: dict[str, Any], actor: str, owner: str, force: bool, decided: bool
) -> Literal["amend", "note"]:
    """What a repeat of the closing verb by `actor` on the finished `row` may do: `amend` its
    outcome, or add a `note` beside it (the owner decided it: `decided`). Refused in words
    otherwise: a stranger to the row needs --force, and even then only adds a note when the
    owner decided."""
    closer = row["closed_by"]
    if actor == owner:
        return "amend"
    if decided:
        if actor != closer and not force:
            raise LifecycleError(
                f"{kind} #{row['id']} was decided by the owner ({owner}) — the owner's decision"
                " is the record; --force to add your words as a note beside it"
            )
        return "note"
    if actor != closer and not force:
        raise LifecycleError(
            f"{kind} #{row['id']} was {past(CLOSING_VERB[kind])} by {closer} — only they or the"
            f" owner may amend its outcome; --force to amend it anyway"
        )
    return "amend"


def edit_changes(payload: Any) -> dict[str, list[Any]]:
    """An `edit` event's payload (`fields`, `previous`, `now`) as each field's [old, new]; an
    edit written before issue 34 kept the old value alone: [old]. {} for any other shape."""
    if not isinstance(payload, dict) or not isinstance(payload.get("fields"), list):
        return {}
    previous, now = payload.get("previous"), payload.get("now")
    previous = previous if isinstance(previous, dict) else {}
    return {
        name: [previous.get(name)] + ([now.get(name)] if isinstance(now, dict) else [])
        for name in payload["fields"]
        if isinstance(name, str)
    }


def quoted(value: object) -> str:
    """A field's value in an amendment's words, on one line: `"text"`, or `(none)`."""
    return "(none)" if value is None else '"' + " ".join(str(value).split()) + '"'


def changes_words(changes: dict[str, list[str | None]]) -> str:
    """`summary "a" → "b"; commit (none) → "beef"`: each amended field, from and to (an
    amendment recorded with its old value alone: `summary was "a"`)."""
    return "; ".join(
        f"{OUTCOME_FIELDS.get(name, name)} {quoted(values[0])} → {quoted(values[1])}"
        if len(values) == 2
        else f"{OUTCOME_FIELDS.get(name, name)} was {quoted(values[0])}"
        for name, values in changes.items()
    )


def amended_text(
    kind: str, item_id: int, actor: str, title: str, changes: dict[str, list[str | None]]
) -> str:
    """The Chief line (and the phone's edit) of an amendment:
    `request #5 "pay the plumber" amended by owner: summary "a" → "b"`."""
    return f'{kind} #{item_id} "{title}" amended by {actor}: {changes_words(changes)}'


def noted_text(
    kind: str, item_id: int, actor: str, title: str, answer: str | None, note: dict[str, str]
) -> str:
    """The Chief line of a note beside the owner's answer:
    `request #5 "pay the plumber": agent adds a note to the owner's decision ("approve"): no`."""
    words = "; ".join(text if name == "text" else f"{name} {text}" for name, text in note.items())
    return (
        f'{kind} #{item_id} "{title}": {actor} adds a note to the owner\'s decision'
        f" ({quoted(answer)}): {words}"
    )


def require_actor(actor: str | None) -> str:
    if not actor or not actor.strip():
        raise UsageError("no actor: pass --as NAME or set COOP_ACTOR")
    actor = actor.strip()
    if not ACTOR_PATTERN.fullmatch(actor):
        raise UsageError(
            f"actor {actor!r} is not accepted: use 1-64 letters, digits or _.@:- (no spaces)"
        )
    if actor.casefold() == DEADLINE_ACTOR:
        # Reserved: a close by this name reads as the deadline's decision (`request wait`).
        raise UsageError(
            f"actor {actor!r} is not accepted: '{DEADLINE_ACTOR}' is the ledger's own name for a"
            " decision by a request's deadline; use another name"
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
    request_id: int,
    ask_key: str,
    title: str,
    choices: list[str] | None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The outbox row's extra for a request filed to the owner: the door rings it alone, with
    one button per choice (none: the owner answers with a text reply), and knows it by its ask
    key (`key`), never by its id alone. `options` (`request_options`' columns, and the
    reminders' `remind_max`) add, each only when set: `deadline_at`, `default` and `remind`
    in the ask, and `urgent: true` beside it. Absent, never null: the door forbids nulls."""
    ask: dict[str, Any] = {
        "request_id": request_id,
        "key": ask_key,
        "title": title,
        "choices": list(choices or []),
    }
    given = options or {}
    if given.get("deadline_at") is not None:
        ask["deadline_at"] = given["deadline_at"]
        if given.get("default_choice") is not None:
            ask["default"] = given["default_choice"]
    if given.get("remind_every_s") is not None:
        ask["remind"] = {"every_s": given["remind_every_s"], "max": given["remind_max"]}
    return {"ask": ask} | ({"urgent": True} if given.get("urgent") else {})


def settles_extra(
    request_id: int,
    ask_key: str,
    *,
    ring: bool = True,
    deadline: tuple[str, str | None] | None = None,
) -> dict[str, Any]:
    """The outbox row's extra for an asked request closed or abandoned: the door voids the
    buttons of that ask (by its key) and edits its message. `ring=False`: the owner's own
    answer from the phone, which lands in the Chief's conversation and never rings back.
    `deadline` (`("closed", label)` or `("abandoned", None)`): the deadline decided it, which
    `settles` says with `by`, `outcome` and, for a close, `choice`."""
    settles: dict[str, Any] = {"request_id": request_id, "key": ask_key}
    if deadline is not None:
        outcome, choice = deadline
        settles |= {"by": DEADLINE_ACTOR, "outcome": outcome}
        if choice is not None:
            settles["choice"] = choice
    return {"settles": settles} | ({} if ring else {"ring": False})


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
    """How a closing event came: `from Telegram` (its payload says so) or `at a terminal`
    (a close by the deadline is told in words of its own: `engine.verbs.phone`)."""
    return "from Telegram" if (payload or {}).get("via") == "telegram" else "at a terminal"


def one_line(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters (a toast shows one short line)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ---- a request's deadline, its default, its reminders, its urgency (issue 28) --------------

#: The actor a deadline closes or abandons a request as: the ledger itself, no person.
DEADLINE_ACTOR = "deadline"
#: The event's `via` when a deadline decided (beside `telegram` for an answer from the phone).
VIA_DEADLINE = "deadline"
# The longest `--deadline` or `--remind` a request takes (a year and a day, in seconds) and the
# shortest `--remind`: the floor's (`plumbing.bounds`), which the door holds too.
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# ASCII digits only (`\d` takes any script's digits), a whole number and one unit.
_DURATION = re.compile(r"([0-9]{1,9})([smhd])")
_CLOCK = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
_DURATION_WORDS = "a duration such as 90s, 30m, 2h or 1d"


def parse_duration(raw: str, flag: str, minimum_s: int = 1) -> int:
    """`90s`, `30m`, `2h`, `1d` as whole seconds, from `minimum_s` to `MAX_WAIT_S`; anything
    else refused in one line naming `flag`."""
    found = _DURATION.fullmatch(raw.strip(" "))
    if found is None:
        raise UsageError(f"{flag} {raw!r} is not {_DURATION_WORDS}")
    seconds = int(found.group(1)) * _UNIT_S[found.group(2)]
    if not minimum_s <= seconds <= MAX_WAIT_S:
        raise UsageError(
            f"{flag} {raw!r} is out of range: give {minimum_s} s to {MAX_WAIT_S // 86400} days"
        )
    return seconds


def parse_deadline(raw: str, now_s: float) -> float:
    """`--deadline`: a duration from now (`90s`, `2h`), or a local time (`18:00`: today if it is
    still ahead, else tomorrow), as the epoch seconds at which the ledger decides the request.
    Anything else refused in one line."""
    text = raw.strip(" ")
    clock = _CLOCK.fullmatch(text)
    if clock is None:
        if ":" in text:
            raise UsageError(f"--deadline {raw!r} is not a time of day: give HH:MM, 00:00 to 23:59")
        if not _DURATION.fullmatch(text):
            raise UsageError(f"--deadline {raw!r} is not {_DURATION_WORDS}, or a time like 18:00")
        return now_s + parse_duration(text, "--deadline")
    now = datetime.fromtimestamp(now_s)  # local time: the owner's clock on the wall
    at = now.replace(hour=int(clock.group(1)), minute=int(clock.group(2)), second=0, microsecond=0)
    if at <= now:
        at += timedelta(days=1)  # wall-clock arithmetic on a naive local time
    return at.timestamp()  # a naive local time: DST as the system's zone says


def request_options(
    options: dict[str, Any], addressed_to: str | None, owner: str, choices: list[str] | None
) -> dict[str, Any]:
    """Check `--deadline`, `--default`, `--remind` and `--urgent` together (raw text in
    `options`, `deadline` already parsed to epoch seconds) and answer the columns to store:
    `deadline_at`, `default_choice` (the request's own label), `remind_every_s`, `urgent`."""
    deadline_at, default = options.get("deadline_at"), options.get("default")
    remind, urgent = options.get("remind"), bool(options.get("urgent"))
    asked = addressed_to is not None and addressed_to == owner
    if default is not None:
        if deadline_at is None:
            raise UsageError("--default needs --deadline: the default is what the deadline decides")
        if not choices:
            raise UsageError("--default names one of --choices: give --choices a,b as well")
        label = match_choice(default, choices)
        if label is None:
            raise UsageError(
                f"--default {default!r} is not one of the choices ({' / '.join(choices)})"
            )
        default = label
    for flag, given in (("--remind", remind is not None), ("--urgent", urgent)):
        if given and not asked:
            whom = f"to {addressed_to}" if addressed_to else "to anyone"
            raise UsageError(
                f"{flag} is only for a request to the owner ({owner}); this one is {whom}:"
                f" add --to {owner}, or drop {flag}"
            )
    every_s = None if remind is None else parse_duration(remind, "--remind", MIN_REMIND_S)
    return {
        "deadline_at": deadline_at,
        "default_choice": default,
        "remind_every_s": every_s,
        "urgent": urgent,
    }


def deadline_clock(deadline_at: float) -> str:
    """The deadline's local wall-clock time, `18:00`."""
    return datetime.fromtimestamp(deadline_at).strftime("%H:%M")


def deadline_when(deadline_at: float, now_s: float) -> str:
    """`18:00 today`, `09:00 tomorrow`, `2026-12-24 18:00`: the deadline as `show` says it."""
    at, now = datetime.fromtimestamp(deadline_at), datetime.fromtimestamp(now_s)
    days = at.toordinal() - now.toordinal()
    clock = at.strftime("%H:%M")
    if days == 0:
        return f"{clock} today"
    if days == 1:
        return f"{clock} tomorrow"
    if days == -1:
        return f"{clock} yesterday"
    return at.strftime("%Y-%m-%d %H:%M")


def deadline_text(request_id: int, title: str, deadline_at: float, choice: str | None) -> str:
    """The Chief line (and the settle's words on the phone) when a deadline decides: `request #5
    "pay the plumber": no answer by its deadline (18:00), so closed with: decline` (the choice
    after the words, so a choice named `no` reads as one), or `..., so abandoned`."""
    decided = "abandoned" if choice is None else f"closed with: {choice}"
    return (
        f'request #{request_id} "{title}": no answer by its deadline'
        f" ({deadline_clock(deadline_at)}), so {decided}"
    )


def deadline_reason(deadline_at: float) -> str:
    """The reason an abandon by the deadline records."""
    return f"no answer by its deadline ({deadline_clock(deadline_at)})"
