"""The owner's answers from the phone, and what the phone's `/status` reads: the two use cases
of the owner service's phone routes (`engine.owner.phone`), each run on a transaction handed in.

    answer_request   a tap on a request's button, or a text reply to its message: applied
                     exactly once per answer key, in one transaction with its event, its outbox
                     row and its filing in `coop_answers`
    phone_summary    open todos and requests, the oldest pending item, the outbox's health

Neither is in `engine.verbs.VERBS`: they have no `coop` command, no public function, and no way
through `/compat/call`. An answer is the owner's own tap, relayed by the door with the service
key; a caller at a terminal closes a request with `coop request close`, and a routed call must
never be able to say it came from Telegram (the every-verb tests hold each verb in `VERBS` to a
CLI command, a public function and the owner's command log alike).

The outcomes of an answer (the door shows `detail` as a toast):

    closed            the request was open or taken: closed by the owner, the choice (or the
                      text) its result; the close's event says `via: telegram` with the key, and
                      its outbox row `{"settles": {N, its ask key}, "ring": false}` (no ring back)
    noted             a text reply to a request with choices: a `note` event, nothing else
    already_closed    closed or abandoned already: nothing changes; who, how, with what result
    not_a_choice      the choice is not one the request offers: nothing changes
    unknown_request   no such request: nothing changes
    not_this_request  the answer names an ask key that is not the request's: the question it
                      answers is no longer in this ledger (the id was handed out again by a
                      fresh coop.db, a restored backup, or it came from another ledger behind
                      the same door): nothing changes

An answer names the request by its id AND the ask key the request was filed with; the key is
checked first of the request's facts, so an answer to a question this ledger no longer holds
never closes, notes or refuses on behalf of a different request that happens to bear its id.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from engine import lifecycle, store
from engine.errors import UsageError
from engine.store import answers as answers_store
from engine.store import ledger as ledger_store
from engine.store import queue
from engine.verbs.ledger import _finish, plain
from engine.verbs.unit import Row, Unit

CLOSED, NOTED, ALREADY_CLOSED = "closed", "noted", "already_closed"
NOT_A_CHOICE, UNKNOWN_REQUEST = "not_a_choice", "unknown_request"
NOT_THIS_REQUEST = "not_this_request"
OUTCOMES = (CLOSED, NOTED, ALREADY_CLOSED, NOT_A_CHOICE, UNKNOWN_REQUEST, NOT_THIS_REQUEST)
#: A toast shows up to 200 characters (the Bot API's `answerCallbackQuery` text).
DETAIL_CHARS = 180
#: The phone's lists: the oldest open items of each kind.
SUMMARY_ITEMS = 20
VIA = "telegram"


def answer_request(
    unit: Unit,
    request_id: int,
    *,
    answer_key: str,
    ask_key: str,
    choice: str | None = None,
    text: str | None = None,
) -> Row:
    """Apply the owner's answer from the phone to request `request_id`, once per `answer_key`,
    when `ask_key` is that request's ask key (else `not_this_request`, nothing changes):
    `choice` (a button's label) or `text` (a reply), exactly one. A key seen before answers its
    filed outcome and changes nothing. The answer: `outcome`, `detail` (one line), `request`
    (the row now, or None), `outbox_id` (the close's row, else None) and `replayed`.

    Not a `@command` and not in `VERBS` (see the module docstring): only the owner service's
    phone route calls it, so nothing else can file an answer as coming from Telegram."""
    if (choice is None) == (text is None):
        raise UsageError("an answer is a choice or a text: give exactly one")
    if text is not None:
        text = lifecycle.require_answer_text(text)
    conn = unit.tx()
    filed = answers_store.find(conn, answer_key)
    if filed is not None:
        return _answer(conn, filed["request_id"], filed["outcome"], filed["detail"], replayed=True)
    outcome, detail, outbox_id = _apply(conn, unit, request_id, (answer_key, ask_key), choice, text)
    detail = lifecycle.one_line(detail, DETAIL_CHARS)
    answers_store.file(conn, answer_key, request_id, outcome, detail, store.now_iso())
    return _answer(conn, request_id, outcome, detail, outbox_id=outbox_id)


def _answer(
    conn: sqlite3.Connection,
    request_id: int,
    outcome: str,
    detail: str,
    *,
    outbox_id: int | None = None,
    replayed: bool = False,
) -> Row:
    row = ledger_store.load(conn, "request", request_id)
    return {
        "outcome": outcome,
        "detail": detail,
        "request": None if row is None else plain(row),
        "outbox_id": outbox_id,
        "replayed": replayed,
    }


def _apply(
    conn: sqlite3.Connection,
    unit: Unit,
    request_id: int,
    keys: tuple[str, str],
    choice: str | None,
    text: str | None,
) -> tuple[str, str, int | None]:
    """Decide and apply one new answer, inside the caller's transaction: its outcome, its
    detail and the close's outbox row id. `keys`: the answer's key and the ask key it names."""
    answer_key, ask_key = keys
    row = ledger_store.load(conn, "request", request_id)
    if row is None:
        return UNKNOWN_REQUEST, f"request #{request_id} does not exist", None
    if row["ask_key"] != ask_key:
        return NOT_THIS_REQUEST, not_this_request_detail(request_id), None
    if row["status"] in lifecycle.TERMINAL:
        return ALREADY_CLOSED, _closed_detail(conn, row), None
    owner = unit.config().owner
    choices: list[str] = json.loads(row["choices"]) if row["choices"] else []
    said: dict[str, Any] = {"via": VIA, "answer_key": answer_key}
    if choice is not None:
        label = lifecycle.match_choice(choice, choices)
        if label is None:
            offered = " / ".join(choices) if choices else "none: reply with text to answer it"
            detail = f"{choice!r} is not a choice of request #{request_id} (its choices: {offered})"
            return NOT_A_CHOICE, detail, None
        result, said["choice"] = label, label
    else:
        assert text is not None
        if choices:
            ledger_store.record_event(
                conn, "request", request_id, "note", owner, {"via": VIA, "text": text}
            )
            return NOTED, f"kept as a note on request #{request_id} (answer it with a button)", None
        result, said["text"] = text, text
    # The owner decides: a request someone has taken is closed over them (`forced_from`).
    closed = _finish("request", request_id, owner, True, result, None, unit, said=said)
    return CLOSED, f"request #{request_id} closed: {result}", closed["outbox_id"]


def not_this_request_detail(request_id: int) -> str:
    """The words of `not_this_request`: the question is gone, the id is someone else's now."""
    return (
        f"This question is no longer in the ledger (request #{request_id} is another request"
        " now); nothing was changed."
    )


def _closed_detail(conn: sqlite3.Connection, row: sqlite3.Row) -> str:
    """`request #7 was already closed by owner at a terminal: decline` (the first close is the
    record: its closer, how its event says it came, its result or reason, and who amended it
    when that was someone else: `... : approve (amended by owner)`)."""
    status = row["status"]
    event = ledger_store.last_event(conn, "request", row["id"], ("close", "abandon"))
    if event is not None and (event["payload"] or {}).get("via") == lifecycle.VIA_DEADLINE:
        # `request #7 was already closed by its deadline (18:00) with no answer: decline`
        detail = f"request #{row['id']} was already {status} by its deadline"
        detail += f" ({lifecycle.deadline_clock(row['deadline_at'])}) with no answer"
        return detail + (f": {row['result_summary']}" if status == "closed" else "")
    how = lifecycle.closed_how(event["payload"] if event else None)
    outcome = row["result_summary"] if status == "closed" else row["reason"]
    detail = f"request #{row['id']} was already {status} by {row['closed_by']} {how}"
    edit = ledger_store.last_event(conn, "request", row["id"], ("edit",))
    if outcome and edit is not None and edit["actor"] != row["closed_by"]:
        # Never another's words as the closer's: the amendment names its own actor.
        outcome += f" (amended by {edit['actor']})"
    return detail + (f": {outcome}" if outcome else "")


def phone_summary(unit: Unit) -> Row:
    """What the phone's `/status`, `/todos` and `/requests` show: open and taken items of each
    kind (how many, the oldest `SUMMARY_ITEMS`; a request with its `ask_key`, by which the
    door rings it again), the oldest of them all, and the outbox's health (pending rows, the
    oldest one's age, the last error of a row still failing)."""
    conn = unit.tx()
    now = time.time()
    answer: Row = {"owner": unit.config().owner}
    oldest: list[Row] = []
    for kind, fields in (("todo", _TODO_FIELDS), ("request", _REQUEST_FIELDS)):
        count, rows = ledger_store.open_items(conn, kind, SUMMARY_ITEMS)
        items = [{name: each[name] for name in fields} for each in map(plain, rows)]
        answer[f"{kind}s"] = {"open": count, "items": items}
        if items:
            oldest.append({"kind": kind, **items[0]})
    answer["oldest"] = None
    if oldest:
        first = min(oldest, key=lambda item: (item["created_at"], item["kind"]))
        age_s = max(0.0, now - store.parse_iso(first["created_at"]).timestamp())
        answer["oldest"] = {
            "kind": first["kind"],
            "id": first["id"],
            "title": first["title"],
            "created_at": first["created_at"],
            "age_s": round(age_s, 3),
        }
    failing = queue.failing(conn, 1)
    answer["outbox"] = {
        "pending": queue.counts(conn)["pending"],
        "oldest_pending_age_s": queue.oldest_pending_age_s(conn),
        "last_error": failing[0]["last_error"] if failing else None,
    }
    return answer


_TODO_FIELDS = ("id", "title", "status", "taken_by", "created_at")
_REQUEST_FIELDS = (*_TODO_FIELDS[:4], "addressed_to", "choices", "ask_key", "created_at")
