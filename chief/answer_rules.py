"""The rules of an answer from the phone: pure (no I/O, no clock, no Telegram), a leaf every
layer may use (the store records what these rules decide; the door's tap path asks them).

An answer is the owner's decision on a request, made with a tap on one of its buttons or a
text reply to its ask message. The door records it durably in chief.db (`chief.store.answers`)
before anything else, then hands it to the ledger, which applies it exactly once (keyed by the
answer's key). What a tap or a reply becomes:

    the same update again (a replay, or a restart before the offset commit)
                                         -> nothing new; the toast says what it was
    a tap on a live button whose request has no deciding answer here
                                         -> a new pending answer (the button's choice)
    a tap when the request already has a deciding answer here (a double tap)
                                         -> nothing new; the toast says what was answered
                                            and where it stands
    a tap on a void or unknown button    -> nothing; the toast says the request is already
                                            settled (and how, when the door knows; what
                                            the deadline decided, when it did)
    a reply to an ask message            -> a new pending text answer: the ledger closes a
                                            request without choices with it, and keeps it as
                                            a note on a request with choices; a text longer
                                            than the ledger keeps is cut, with a marker saying
                                            so (`fit_reply`), and the owner told (`cut_note`)
    a reply holding a NUL                -> nothing: refused as `coop` refuses a NUL in its
                                            arguments, the owner told why
    a reply to any other message         -> not an answer

Every answer names its ask key (the ledger's random key of the question the button or the
message belongs to), and "this request" means "this ask key" throughout: request ids come back
(a fresh coop.db, a restored backup, a second ledger behind the door), ask keys never do. The
ledger applies an answer only to the request that bears its ask key; otherwise it answers
`not_this_request` (the question is no longer in the ledger) and changes nothing.

An answer's state: `pending` until the ledger answers, then `applied` (it closed the request,
or was kept as a note) or `refused` (the ledger's rules said no: already closed, not a
choice, no such request, not this request). A deciding answer is a tap that is not refused,
or a text answer that closed its request: a text kept as a note decides nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

AnswerState = Literal["pending", "applied", "refused"]
Outcome = Literal[
    "closed", "noted", "already_closed", "not_a_choice", "unknown_request", "not_this_request"
]

APPLIED_OUTCOMES: frozenset[str] = frozenset({"closed", "noted"})
REFUSED_OUTCOMES: frozenset[str] = frozenset(
    {"already_closed", "not_a_choice", "unknown_request", "not_this_request"}
)
# Every outcome the ledger answers (SPEC's answer route; engine.verbs.phone.OUTCOMES).
OUTCOMES: frozenset[str] = APPLIED_OUTCOMES | REFUSED_OUTCOMES
# The outcomes that leave the ask message settled: edited to say so, its buttons removed.
SETTLING_OUTCOMES: frozenset[str] = frozenset(
    {"closed", "already_closed", "unknown_request", "not_this_request"}
)
ANSWER_KEY_PREFIX = "a-"
ANSWER_KEY_RE = re.compile(r"a-[0-9a-f]{32}")
# Telegram shows at most 200 characters of a callback query's answer.
TOAST_MAX_CHARS = 200
# What a text answer may carry to the ledger (its own limit, SPEC: 1..4000 characters).
ANSWER_TEXT_MAX_CHARS = 4000
#: The end of a reply cut to fit: what it was and what was kept, in the text the ledger keeps.
CUT_MARKER = "\n[… cut by the door: {total} characters, the first {kept} kept]"


@dataclass(frozen=True)
class Button:
    """What chief.db knows of a tapped button's token: its request and the ask key of the
    question, its choice, whether it is still live, and, once void, how its ask was settled
    (when the door was told)."""

    request_id: int
    ask_key: str
    choice: str
    live: bool
    settled: str | None = None
    #: once its deadline decided it (issue 28): what a late tap is told, e.g. `The deadline
    #: decided this at 18:00: decline. Nothing was changed.`
    decided_by_deadline: str | None = None


@dataclass(frozen=True)
class Answer:
    """One answer row of chief.db, as the store reads it back."""

    answer_key: str
    update_id: int
    request_id: int
    ask_key: str  # the question answered: the ledger applies it only to the request with it
    choice: str | None
    text: str | None
    chat_id: int
    message_id: int  # the ask message the answer is about (its buttons, or the one replied to)
    ask_text: str  # that message's text when the answer came, for the edit that settles it
    callback_query_id: str | None
    state: AnswerState
    outcome: str | None = None
    detail: str | None = None
    attempts: int = 0
    edited: bool = False
    next_attempt_at: float = 0.0  # unix seconds of the forwarder's next try; 0: at once

    @property
    def deciding(self) -> bool:
        """Whether this answer decides its request here (see the module docstring)."""
        if self.choice is not None:
            return self.state != "refused"
        return self.outcome == "closed"

    @property
    def what(self) -> str:
        """The answer in the owner's words: the choice, or the text (cut for a toast)."""
        if self.choice is not None:
            return self.choice
        text = self.text or ""
        return text if len(text) <= 40 else text[:39] + "…"


@dataclass(frozen=True)
class Tap:
    """A button pressed by the obeyed user, as the tap path hands it to the store."""

    update_id: int
    token: str
    callback_query_id: str
    chat_id: int
    message_id: int
    ask_text: str
    update_key: str  # the update's id and content digest: a replay's guard (ids repeat)


@dataclass(frozen=True)
class Reply:
    """A text reply by the obeyed user to one of the bot's messages."""

    update_id: int
    text: str
    chat_id: int
    message_id: int  # the message replied to
    ask_text: str
    update_key: str  # the update's id and content digest: a replay's guard (ids repeat)


@dataclass(frozen=True)
class NewAnswer:
    """Record a new pending answer."""

    request_id: int
    ask_key: str
    choice: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Seen:
    """The update was recorded before (a replay): nothing new; this is its answer."""

    answer: Answer


@dataclass(frozen=True)
class Refused:
    """Nothing is recorded; the toast (for a reply: the door's reply) says why."""

    toast: str


TapDecision = NewAnswer | Seen | Refused


def decide_tap(
    replayed: Answer | None, button: Button | None, earlier: Answer | None
) -> TapDecision:
    """What a tap becomes: `replayed` is the answer already recorded for this update, `button`
    the token's facts (None: no such token), `earlier` the ask's deciding answer here."""
    if replayed is not None:
        return Seen(replayed)
    if button is None:
        return Refused("This request is already settled; nothing was changed.")
    if earlier is not None:
        return Refused(double_tap_toast(earlier))
    if not button.live and button.decided_by_deadline is not None:
        return Refused(cut(button.decided_by_deadline))
    if not button.live:
        how = f" ({button.settled})" if button.settled else ""
        return Refused(
            cut(f"Request #{button.request_id} is already settled{how}; nothing was changed.")
        )
    return NewAnswer(button.request_id, button.ask_key, choice=button.choice)


def decide_reply(
    replayed: Answer | None, asked: tuple[int, str] | None, text: str
) -> NewAnswer | Seen | Refused | None:
    """What a reply becomes: `asked` is the (request id, ask key) of the ask message replied
    to (None: not an ask message, so not an answer). A NUL is refused, as `coop` refuses it in
    an argument; a text past the ledger's limit is cut, marked (`fit_reply`)."""
    if replayed is not None:
        return Seen(replayed)
    if asked is None or not text.strip():
        return None
    if "\x00" in text:
        return Refused(
            f"Request #{asked[0]}: your reply was not taken: it holds a NUL character, which "
            "Coop does not keep. Send it again without it."
        )
    return NewAnswer(*asked, text=fit_reply(text))


def fit_reply(text: str) -> str:
    """`text` within ANSWER_TEXT_MAX_CHARS: as it is, or its beginning and `CUT_MARKER`."""
    if len(text) <= ANSWER_TEXT_MAX_CHARS:
        return text
    kept = _kept_of(len(text))
    return text[:kept] + CUT_MARKER.format(total=len(text), kept=kept)


def _kept_of(total: int) -> int:
    """How much of a reply of `total` characters `fit_reply` keeps, its marker included."""
    return ANSWER_TEXT_MAX_CHARS - len(CUT_MARKER.format(total=total, kept=ANSWER_TEXT_MAX_CHARS))


def cut_note(request_id: int, text: str) -> str | None:
    """What the owner is told of a reply `fit_reply` cut (None: it was kept whole)."""
    if len(text) <= ANSWER_TEXT_MAX_CHARS:
        return None
    kept = _kept_of(len(text))
    return (
        f"Request #{request_id}: your reply was {len(text)} characters, more than the "
        f"{ANSWER_TEXT_MAX_CHARS} Coop keeps: it was cut to its first {kept}, marked as cut."
    )


def state_for(outcome: str) -> AnswerState:
    """The answer's state once the ledger has answered `outcome`."""
    return "applied" if outcome in APPLIED_OUTCOMES else "refused"


def double_tap_toast(earlier: Answer) -> str:
    """The toast of a tap on a request already answered here."""
    return cut(
        f"Request #{earlier.request_id} was already answered here: {earlier.what} "
        f"({where(earlier)})."
    )


def where(answer: Answer) -> str:
    """Where an answer stands, in a few words."""
    if answer.state == "pending":
        return "saved, waiting for the ledger"
    if answer.outcome == "closed":
        return "closed"
    if answer.outcome == "noted":
        return "kept as a note"
    return f"refused: {answer.detail}" if answer.detail else "refused"


def toast_for(answer: Answer) -> str:
    """The toast of a tap once its answer is recorded: what the ledger said, or, still
    pending, that it is saved and will be applied when the ledger answers."""
    if answer.state == "pending":
        return cut(
            f"Saved: {answer.what} for request #{answer.request_id}. It will be applied when "
            "the ledger answers."
        )
    if answer.outcome == "closed":
        return cut(f"Done: request #{answer.request_id} closed with {answer.what}.")
    return cut(answer.detail or f"Request #{answer.request_id}: {answer.outcome}.")


def settled_line(answer: Answer) -> str | None:
    """The line the ask message gains once `answer` settles its request (below its text, its
    buttons removed); None: the ledger's answer leaves the message as it is (a text kept as a
    note, a choice the request does not offer)."""
    if answer.outcome not in SETTLING_OUTCOMES:
        return None
    if answer.outcome == "closed":
        return f"✅ {answer.what} (answered from Telegram)"
    return f"ℹ️ {answer.detail or 'already settled'}"


def cut(text: str, limit: int = TOAST_MAX_CHARS) -> str:
    """`text` within `limit` characters (an ellipsis marks a cut)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def backoff_s(attempts: int, *, base_s: float = 0.2, max_s: float = 10.0) -> float:
    """How long the forwarder waits before it tries an answer again after `attempts` failed
    tries: doubling from `base_s`, at most `max_s`."""
    return float(min(max_s, base_s * (2 ** max(0, attempts - 1))))
