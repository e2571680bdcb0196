"""The owner's answers from the phone (`telegram_answers`): every statement on that table.

One row per tap or reply that became an answer (`chief.answer_rules` decides which do): its
`answer_key` (`a-` + 32 hex, the ledger's exactly-once key), the Telegram update's key
(`update_key`, its id and content digest, UNIQUE: a replayed update finds its row, a new update
under a reused id does not) and its `update_id`, the request and the ask key of the question
(what "this request" means here: ids come back, ask keys never do), the choice or text, the
callback query to answer, the ask message (its chat, id and text then), the state (`pending`
until the ledger answers, then `applied` or `refused`), the ledger's outcome and detail, the
forwarder's tries, and when its outcome was handed to the asks' edits (`edited_at`: in the
transaction that settles it).

Every function runs on the store's connection thread; `record_tap` and `record_reply` are one
transaction each (the caller wraps them in `write`): the facts are read, the rules decide,
and the decision is written, with no other writer between (BEGIN IMMEDIATE).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any

from chief.answer_rules import (
    Answer,
    Button,
    NewAnswer,
    Refused,
    Reply,
    Seen,
    Tap,
    TapDecision,
    state_for,
)
from chief.reminder_rules import deadline_toast
from chief.store import asks
from chief.store.sql import utc_now

COLUMNS = (
    "answer_key, update_id, request_id, choice, text, chat_id, message_id, ask_text, "
    "callback_query_id, state, outcome, detail, attempts, edited_at IS NOT NULL, "
    "next_attempt_at, ask_key"
)

# Reads a button token's facts inside the record transaction (the asks' store owns tokens).
ButtonOf = Callable[[sqlite3.Connection, str], Button | None]
# Reads the (request id, ask key) of an ask message, by (chat id, message id), inside the same
# transaction.
AskOf = Callable[[sqlite3.Connection, int, int], tuple[int, str] | None]


def _answer(row: tuple[Any, ...]) -> Answer:
    key, update, request, choice, text, chat, message, ask, query, state, outcome, detail = row[:12]
    return Answer(
        answer_key=str(key),
        update_id=int(update),
        request_id=int(request),
        ask_key=str(row[15]),
        choice=None if choice is None else str(choice),
        text=None if text is None else str(text),
        chat_id=int(chat),
        message_id=int(message),
        ask_text=str(ask),
        callback_query_id=None if query is None else str(query),
        state=state,  # the table CHECKs it is one of AnswerState
        outcome=None if outcome is None else str(outcome),
        detail=None if detail is None else str(detail),
        attempts=int(row[12]),
        edited=bool(row[13]),
        next_attempt_at=float(row[14]),
    )


def by_update(conn: sqlite3.Connection, update_key: str) -> Answer | None:
    """The answer recorded for this Telegram update (by its key, `chief.telegram.update_key`),
    if any."""
    row = conn.execute(
        f"SELECT {COLUMNS} FROM telegram_answers WHERE update_key = ?", (update_key,)
    ).fetchone()
    return None if row is None else _answer(row)


def by_key(conn: sqlite3.Connection, answer_key: str) -> Answer | None:
    row = conn.execute(
        f"SELECT {COLUMNS} FROM telegram_answers WHERE answer_key = ?", (answer_key,)
    ).fetchone()
    return None if row is None else _answer(row)


def deciding(conn: sqlite3.Connection, ask_key: str) -> Answer | None:
    """The ask's first deciding answer here: a tap not refused, or a text that closed it."""
    row = conn.execute(
        f"SELECT {COLUMNS} FROM telegram_answers WHERE ask_key = ? AND ("
        "(choice IS NOT NULL AND state <> 'refused') OR outcome = 'closed') "
        "ORDER BY recorded_at, rowid LIMIT 1",
        (ask_key,),
    ).fetchone()
    return None if row is None else _answer(row)


def _insert(
    conn: sqlite3.Connection, answer_key: str, update: tuple[str, int], new: NewAnswer,
    chat_id: int, message_id: int, ask_text: str, callback_query_id: str | None,
) -> Answer:  # fmt: skip
    conn.execute(
        "INSERT INTO telegram_answers (answer_key, update_key, update_id, request_id, ask_key, "
        "choice, text, chat_id, message_id, ask_text, callback_query_id, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (answer_key, *update, new.request_id, new.ask_key, new.choice, new.text, chat_id,
         message_id, ask_text, callback_query_id, utc_now()),
    )  # fmt: skip
    answer = by_key(conn, answer_key)
    assert answer is not None
    return answer


def record_tap(
    conn: sqlite3.Connection,
    tap: Tap,
    answer_key: str,
    button_of: ButtonOf,
    decide: Callable[[Answer | None, Button | None, Answer | None], TapDecision],
) -> Answer | Seen | Refused:
    """One transaction: read the tap's facts, let `decide` rule, and record a new answer when
    it says so (under `answer_key`). The new answer, or the decision that recorded nothing."""
    replayed = by_update(conn, tap.update_key)
    button = None if replayed is not None else button_of(conn, tap.token)
    earlier = None if button is None else deciding(conn, button.ask_key)
    decision = decide(replayed, button, earlier)
    if not isinstance(decision, NewAnswer):
        return decision
    return _insert(
        conn, answer_key, (tap.update_key, tap.update_id), decision, tap.chat_id,
        tap.message_id, tap.ask_text, tap.callback_query_id,
    )  # fmt: skip


def record_reply(
    conn: sqlite3.Connection,
    reply: Reply,
    answer_key: str,
    ask_of: AskOf,
    decide: Callable[
        [Answer | None, tuple[int, str] | None, str], NewAnswer | Seen | Refused | None
    ],
) -> Answer | Seen | Refused | None:
    """One transaction: the reply's facts, the rules' decision, a new text answer if so."""
    replayed = by_update(conn, reply.update_key)
    asked = None if replayed is not None else ask_of(conn, reply.chat_id, reply.message_id)
    decision = decide(replayed, asked, reply.text)
    if not isinstance(decision, NewAnswer):
        return decision
    return _insert(
        conn, answer_key, (reply.update_key, reply.update_id), decision, reply.chat_id,
        reply.message_id, reply.ask_text, None,
    )  # fmt: skip


def asks_button(conn: sqlite3.Connection, token: str) -> Button | None:
    """A button token's facts, from the asks' tokens (`chief.store.asks`)."""
    found = asks.button(conn, token)
    if found is None:
        return None
    ask_key, request_id, choice, void = found
    settled = asks.settled_text(conn, ask_key) if void else None
    if settled is not None:  # the settling row's text, on one line for a toast
        settled = " — ".join(line.strip() for line in settled.splitlines() if line.strip())
    decided = asks.deadline_decision(conn, ask_key) if void else None
    toast = None if decided is None else deadline_toast(*decided, time.time())  # local time
    return Button(
        request_id, ask_key, choice, live=not void, settled=settled, decided_by_deadline=toast
    )


def asks_request(conn: sqlite3.Connection, chat_id: int, message_id: int) -> tuple[int, str] | None:
    """The (request id, ask key) a Telegram message asked, from the asks' messages
    (`chief.store.asks`)."""
    found = asks.ask_by_message(conn, chat_id, message_id)
    return None if found is None else (found[1], found[0])


def settle(
    conn: sqlite3.Connection,
    answer_key: str,
    outcome: str,
    detail: str,
    settled_line: Callable[[Answer], str | None],
) -> tuple[Answer | None, bool]:
    """Record the ledger's answer (once: a pending row only) and, when `settled_line` gives
    the ask message a line to show (a closed request, one the ledger says was settled, or a
    question the ledger no longer holds), settle that ask (by its key, never another ask of
    the same request id) in the same transaction: its buttons void, an edit queued for each
    message that rang it (`chief.store.asks.settle`, once per ask). The row as it
    now stands, and whether edits were queued."""
    conn.execute(
        "UPDATE telegram_answers SET state = ?, outcome = ?, detail = ?, settled_at = ?, "
        "last_error = NULL WHERE answer_key = ? AND state = 'pending'",
        (state_for(outcome), outcome, detail, utc_now(), answer_key),
    )
    answer = by_key(conn, answer_key)
    if answer is None or answer.edited:
        return answer, False
    line = settled_line(answer)
    queued = 0 if line is None else asks.settle(conn, answer.ask_key, line)
    mark_edited(conn, answer_key)
    return by_key(conn, answer_key), queued > 0


def defer(conn: sqlite3.Connection, answer_key: str, next_attempt_at: float, error: str) -> None:
    """A try that reached no answer from the ledger: count it, and when to try again."""
    conn.execute(
        "UPDATE telegram_answers SET attempts = attempts + 1, next_attempt_at = ?, "
        "last_error = ? WHERE answer_key = ? AND state = 'pending'",
        (next_attempt_at, error, answer_key),
    )


def mark_edited(conn: sqlite3.Connection, answer_key: str) -> None:
    """The answer's outcome is handed to the asks' edits (or needs none): done here."""
    conn.execute(
        "UPDATE telegram_answers SET edited_at = ? WHERE answer_key = ? AND edited_at IS NULL",
        (utc_now(), answer_key),
    )


def open_answers(conn: sqlite3.Connection, limit: int) -> list[Answer]:
    """The answers still waiting for the ledger, the earliest recorded first."""
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM telegram_answers WHERE state = 'pending' "
        "ORDER BY recorded_at, rowid LIMIT ?",
        (limit,),
    ).fetchall()
    return [_answer(row) for row in rows]


def pending_count(conn: sqlite3.Connection) -> int:
    """Answers still waiting for the ledger."""
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM telegram_answers WHERE state = 'pending'"
    ).fetchone()
    return int(count)
