"""The door's asks (issue 21): requests to the owner rung alone with one button per choice.

Tables (every statement on them is here):

    asks           one row per request the door was asked about: its title and choices, the
                   outbox row that asked (its delivery key, so a retry of that row is known),
                   `voided_at` (its buttons are void: the request was settled, or an answer
                   took it) and `settled_at` with the settling row's text
    ask_buttons    one opaque token per choice (`b-` + 22 url-safe characters from `secrets`:
                   never an id or a command), the request and the choice it stands for, and
                   `void`; a request asked again with other choices gets fresh tokens
    ask_messages   each Telegram message that rang an ask, (chat_id, message_id) -> request,
                   with the text it showed; written in the transaction of its sent mark
    ask_edits      the edits a settle owes: the ask message's text plus the settling row's,
                   no buttons; queued in the settle's transaction, performed and retried
                   (bounded) by the door's ask task (`chief.door.asks`), gone once done

The Telegram queue entry that rings an ask names its request (`telegram_queue.ask_request_id`).
Every function runs on the store's connection thread, inside the caller's transaction. The
queue's own statements stay in `chief.store.telegram`; `head` and `mark_rung` here are the
queue's, with the asks' part added in the same transaction.

The lookups the phone's answers use: `button(conn, token)`, `ask_by_message(conn, chat_id,
message_id)`, `asks_of_request(conn, request_id)` and `void_request(conn, request_id)`.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass, replace

from chief.model import Ask
from chief.store import telegram
from chief.store.sql import utc_now

BUTTON_PREFIX = "b-"  # a button token starts so; the rest is random
TOKEN_BYTES = 16  # 22 url-safe characters: 24 bytes of callback_data, well inside Telegram's 64
# Between a settled ask's text and the settling row's text in the edited message.
SETTLE_SEPARATOR = "\n\n"

Buttons = telegram.Buttons


@dataclass(frozen=True)
class AskMessage:
    """One Telegram message that rang an ask."""

    chat_id: int | str
    message_id: int
    text: str
    sent_at: str


@dataclass(frozen=True)
class AskEdit:
    """One edit a settle owes: `text` on (chat_id, message_id), its buttons removed."""

    seq: int
    chat_id: int | str
    message_id: int
    request_id: int
    text: str
    attempts: int


def mint_token() -> str:
    """A fresh button token: opaque, random, 24 ASCII bytes."""
    return BUTTON_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def open_ask(conn: sqlite3.Connection, ask: Ask, outbox_id: str | None) -> bool:
    """Record that `outbox_id` asks `ask` (its buttons live, minted unless live ones for the
    same choices exist); whether its entry is to be queued. A retry of the outbox row that
    asked, once the request is void (settled before it rang), is not: nothing rings for it."""
    row = conn.execute(
        "SELECT outbox_id, voided_at FROM asks WHERE request_id = ?", (ask.request_id,)
    ).fetchone()
    if row is not None and outbox_id is not None and row[0] == outbox_id and row[1] is not None:
        return False
    _reopen(conn, ask, outbox_id)
    return True


def ensure_open(conn: sqlite3.Connection, ask: Ask) -> None:
    """The request open with live buttons, as the ledger says it is (a reask): recorded when
    this chief.db never saw it, reopened when it was void here."""
    row = conn.execute(
        "SELECT outbox_id FROM asks WHERE request_id = ?", (ask.request_id,)
    ).fetchone()
    _reopen(conn, ask, None if row is None else row[0])


def _reopen(conn: sqlite3.Connection, ask: Ask, outbox_id: str | None) -> None:
    choices = json.dumps(list(ask.choices))
    conn.execute(
        "INSERT INTO asks (request_id, title, choices, outbox_id, opened_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (request_id) DO UPDATE SET title = excluded.title, "
        "choices = excluded.choices, outbox_id = excluded.outbox_id, voided_at = NULL, "
        "settled_at = NULL, settle_text = NULL",
        (ask.request_id, ask.title, choices, outbox_id, utc_now()),
    )
    live = [label for label, _ in live_buttons(conn, ask.request_id)]
    if live == list(ask.choices):
        return
    conn.execute("UPDATE ask_buttons SET void = 1 WHERE request_id = ?", (ask.request_id,))
    now = utc_now()
    conn.executemany(
        "INSERT INTO ask_buttons (token, request_id, choice, position, minted_at) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (mint_token(), ask.request_id, choice, position, now)
            for position, choice in enumerate(ask.choices)
        ],
    )


def live_buttons(conn: sqlite3.Connection, request_id: int) -> Buttons:
    """The request's live buttons, (label, token) in the choices' order."""
    rows = conn.execute(
        "SELECT choice, token FROM ask_buttons WHERE request_id = ? AND void = 0 ORDER BY position",
        (request_id,),
    ).fetchall()
    return tuple((str(choice), str(token)) for choice, token in rows)


def button(conn: sqlite3.Connection, token: str) -> tuple[int, str, bool] | None:
    """(request id, choice, void) of a button token; None for a token this chief.db never
    minted."""
    row = conn.execute(
        "SELECT request_id, choice, void FROM ask_buttons WHERE token = ?", (token,)
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), bool(row[2]))


def settled_text(conn: sqlite3.Connection, request_id: int) -> str | None:
    """The text of the row that settled the request (how it was closed, as the ledger said),
    or None when it was not settled through the door."""
    row = conn.execute(
        "SELECT settle_text FROM asks WHERE request_id = ?", (request_id,)
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def ask_by_message(
    conn: sqlite3.Connection, chat_id: int, message_id: int
) -> tuple[int, list[str], bool] | None:
    """(request id, choices, void) of the ask a Telegram message rang; None when that message
    rang no ask."""
    row = conn.execute(
        "SELECT a.request_id, a.choices, a.voided_at IS NOT NULL FROM ask_messages m "
        "JOIN asks a ON a.request_id = m.request_id WHERE m.chat_id = ? AND m.message_id = ?",
        (chat_id, message_id),
    ).fetchone()
    return None if row is None else (int(row[0]), list(json.loads(row[1])), bool(row[2]))


def asks_of_request(conn: sqlite3.Connection, request_id: int) -> list[AskMessage]:
    """Every message that rang the request, oldest first (the last is its newest ask)."""
    rows = conn.execute(
        "SELECT chat_id, message_id, text, sent_at FROM ask_messages WHERE request_id = ? "
        "ORDER BY sent_at, rowid",
        (request_id,),
    ).fetchall()
    return [AskMessage(chat, int(message), str(text), str(at)) for chat, message, text, at in rows]


def void_request(conn: sqlite3.Connection, request_id: int) -> None:
    """The request's buttons void (its answer is taken, or it was settled), and its asks not
    yet sent never ring. Idempotent."""
    conn.execute(
        "UPDATE asks SET voided_at = ? WHERE request_id = ? AND voided_at IS NULL",
        (utc_now(), request_id),
    )
    conn.execute("UPDATE ask_buttons SET void = 1 WHERE request_id = ?", (request_id,))
    telegram.drop_void_asks(conn)


def settle(conn: sqlite3.Connection, request_id: int, text: str) -> int:
    """Request `request_id` is closed or abandoned, told by a row whose text is `text`: its
    buttons void, and an edit queued for each message that rang it. Once per request (a second
    settle changes nothing); a request this chief.db never asked about is no business of it.
    How many edits were queued."""
    row = conn.execute("SELECT settled_at FROM asks WHERE request_id = ?", (request_id,)).fetchone()
    if row is None or row[0] is not None:
        return 0
    conn.execute(
        "UPDATE asks SET settled_at = ?, settle_text = ? WHERE request_id = ?",
        (utc_now(), text, request_id),
    )
    void_request(conn, request_id)
    messages = asks_of_request(conn, request_id)
    for message in messages:
        _queue_edit(conn, request_id, message.chat_id, message.message_id, message.text, text)
    return len(messages)


def remember(
    conn: sqlite3.Connection, seqs: list[int], chat_id: int | str, message_id: int
) -> None:
    """The ask entries among `seqs` rang as (chat_id, message_id): remembered against their
    request (before the entries leave the queue). A request settled while its ask was in
    flight gets its edit queued at once."""
    now = utc_now()
    for request_id, text in telegram.ask_entries(conn, seqs):
        conn.execute(
            "INSERT OR REPLACE INTO ask_messages (chat_id, message_id, request_id, text, "
            "sent_at) VALUES (?, ?, ?, ?, ?)",
            (chat_id, message_id, request_id, text, now),
        )
        row = conn.execute(
            "SELECT settle_text FROM asks WHERE request_id = ?", (request_id,)
        ).fetchone()
        if row is not None and row[0] is not None:
            _queue_edit(conn, request_id, chat_id, message_id, text, str(row[0]))


def mark_rung(
    conn: sqlite3.Connection,
    seqs: list[int],
    outbox_ids: list[str],
    telegram_message_id: int,
    chat_id: int | str | None,
) -> None:
    """`telegram.mark_rung`, with the asks the message carried remembered (chat_id given) in
    the same transaction."""
    if chat_id is not None:
        remember(conn, seqs, chat_id, telegram_message_id)
    telegram.mark_rung(conn, seqs, outbox_ids, telegram_message_id)


def head(conn: sqlite3.Connection, limit: int) -> list[telegram.QueuedRing]:
    """`telegram.head`, each ask entry with its request's live buttons."""
    entries = telegram.head(conn, limit)
    return [
        entry
        if entry.ask_request_id is None
        else replace(entry, buttons=live_buttons(conn, entry.ask_request_id))
        for entry in entries
    ]


def queue_ask(conn: sqlite3.Connection, ask: Ask, text: str) -> tuple[int, int]:
    """Ring `ask` again (a reask): the request open with live buttons, and an ask entry with
    no outbox row queued; its seq and how many entries are ahead of it."""
    ensure_open(conn, ask)
    seq = telegram.insert_telegram(conn, None, text, ask.request_id)
    return seq, telegram.entries_ahead(conn, [seq])[seq]


def _queue_edit(
    conn: sqlite3.Connection,
    request_id: int,
    chat_id: int | str,
    message_id: int,
    asked: str,
    settled: str,
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO ask_edits (chat_id, message_id, request_id, text, queued_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (chat_id, message_id, request_id, asked + SETTLE_SEPARATOR + settled, utc_now()),
    )


def due_edits(conn: sqlite3.Connection, now: float, limit: int) -> list[AskEdit]:
    """The edits due at `now` (unix seconds), oldest first."""
    rows = conn.execute(
        "SELECT seq, chat_id, message_id, request_id, text, attempts FROM ask_edits "
        "WHERE next_attempt_at <= ? ORDER BY seq LIMIT ?",
        (now, limit),
    ).fetchall()
    return [AskEdit(int(a), b, int(c), int(d), str(e), int(f)) for a, b, c, d, e, f in rows]


def next_edit_at(conn: sqlite3.Connection) -> float | None:
    """When the earliest queued edit is due (unix seconds), or None when none is queued."""
    (at,) = conn.execute("SELECT MIN(next_attempt_at) FROM ask_edits").fetchone()
    return None if at is None else float(at)


def edit_done(conn: sqlite3.Connection, seq: int) -> None:
    """The edit happened (or there is nothing left to edit): off the queue."""
    conn.execute("DELETE FROM ask_edits WHERE seq = ?", (seq,))


def defer_edit(conn: sqlite3.Connection, seq: int, next_attempt_at: float, error: str) -> None:
    conn.execute(
        "UPDATE ask_edits SET attempts = attempts + 1, next_attempt_at = ?, last_error = ? "
        "WHERE seq = ?",
        (next_attempt_at, error, seq),
    )
