"""The door's asks (issue 21): requests to the owner rung alone with one button per choice.

Every ask is known by its ask key (`q-` + 32 hex, drawn by the ledger with the request), never
by its request id alone: a request id comes back (a fresh coop.db, a restored backup, a second
ledger behind this door), so keying by it would let a new request's settle edit an old ask's
message, and an old ask's live button answer a new request. The request id rides along for
the words.

Tables (every statement on them is here):

    asks           one row per ask key the door was asked about: its request id, title and
                   choices, the outbox row that asked (its delivery key, so a retry of that
                   row is known), `voided_at` (its buttons are void: it was settled, or an
                   answer took it) and `settled_at` with the settling row's text; its
                   deadline, default and reminders' bounds, and when its deadline decided it,
                   how (`settled_by`, `settled_outcome`, `settled_choice`: a late tap's toast)
    ask_buttons    one opaque token per choice (`b-` + 22 url-safe characters from `secrets`:
                   never an id or a command), the ask and the choice it stands for, and
                   `void`; an ask rung again with other choices gets fresh tokens
    ask_messages   each Telegram message that rang an ask, (chat_id, message_id) -> ask key,
                   with the text it showed; written in the transaction of its sent mark
    ask_edits      the edits a settle owes: the ask message's text plus the settling row's
                   (and each amendment's, issue 34), no buttons; queued in the settle's (or the
                   amendment's) transaction, performed and retried
                   (bounded) by the door's ask task (`chief.phone.asks`), gone once done

The Telegram queue entry that rings an ask names its key (`telegram_queue.ask_key`).
Every function runs on the store's connection thread, inside the caller's transaction. The
queue's own statements stay in `chief.store.telegram`; `head` and `mark_rung` here are the
queue's, with the asks' part added in the same transaction.

The lookups the phone's answers use: `button(conn, token)`, `ask_by_message(conn, chat_id,
message_id)`, `messages_of_ask(conn, ask_key)` and `void_ask(conn, ask_key)`.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from dataclasses import dataclass, replace

from chief.model import Ask
from chief.store import reminders, telegram
from chief.store.sql import utc_now

BUTTON_PREFIX = "b-"  # a button token starts so; the rest is random
TOKEN_BYTES = 16  # 22 url-safe characters: 24 bytes of callback_data, well inside Telegram's 64
# Between a settled ask's text and the settling row's text in the edited message.
SETTLE_SEPARATOR = "\n\n"
# Between the settling row's text and each amendment's below it (issue 34).
AMEND_SEPARATOR = "\n"

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
    ask_key: str
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
        "SELECT outbox_id, voided_at FROM asks WHERE ask_key = ?", (ask.key,)
    ).fetchone()
    if row is not None and outbox_id is not None and row[0] == outbox_id and row[1] is not None:
        return False
    _reopen(conn, ask, outbox_id)
    return True


def ensure_open(conn: sqlite3.Connection, ask: Ask) -> None:
    """The ask open with live buttons, as the ledger says it is (a reask): recorded when this
    chief.db never saw it, reopened when it was void here."""
    row = conn.execute("SELECT outbox_id FROM asks WHERE ask_key = ?", (ask.key,)).fetchone()
    _reopen(conn, ask, None if row is None else row[0])


def _reopen(conn: sqlite3.Connection, ask: Ask, outbox_id: str | None) -> None:
    choices = json.dumps(list(ask.choices))
    every_s, most = (None, None) if ask.remind is None else (ask.remind.every_s, ask.remind.max)
    conn.execute(
        "INSERT INTO asks (ask_key, request_id, title, choices, outbox_id, opened_at, "
        "deadline_at, default_choice, remind_every_s, remind_max) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (ask_key) DO UPDATE SET "
        "title = excluded.title, choices = excluded.choices, outbox_id = excluded.outbox_id, "
        "voided_at = NULL, settled_at = NULL, settle_text = NULL, settled_by = NULL, "
        "settled_outcome = NULL, settled_choice = NULL, "
        # A reask knows no deadline or reminders (the ledger's list): the ask keeps its own.
        "deadline_at = COALESCE(excluded.deadline_at, deadline_at), "
        "default_choice = COALESCE(excluded.default_choice, default_choice), "
        "remind_every_s = COALESCE(excluded.remind_every_s, remind_every_s), "
        "remind_max = COALESCE(excluded.remind_max, remind_max)",
        (ask.key, ask.request_id, ask.title, choices, outbox_id, utc_now(), ask.deadline_at,
         ask.default, every_s, most),
    )  # fmt: skip
    live = [label for label, _ in live_buttons(conn, ask.key)]
    if live == list(ask.choices):
        return
    conn.execute("UPDATE ask_buttons SET void = 1 WHERE ask_key = ?", (ask.key,))
    now = utc_now()
    conn.executemany(
        "INSERT INTO ask_buttons (token, ask_key, choice, position, minted_at) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (mint_token(), ask.key, choice, position, now)
            for position, choice in enumerate(ask.choices)
        ],
    )


def live_buttons(conn: sqlite3.Connection, ask_key: str) -> Buttons:
    """The ask's live buttons, (label, token) in the choices' order."""
    rows = conn.execute(
        "SELECT choice, token FROM ask_buttons WHERE ask_key = ? AND void = 0 ORDER BY position",
        (ask_key,),
    ).fetchall()
    return tuple((str(choice), str(token)) for choice, token in rows)


def button(conn: sqlite3.Connection, token: str) -> tuple[str, int, str, bool] | None:
    """(ask key, request id, choice, void) of a button token; None for a token this chief.db
    never minted."""
    row = conn.execute(
        "SELECT b.ask_key, a.request_id, b.choice, b.void FROM ask_buttons b "
        "JOIN asks a ON a.ask_key = b.ask_key WHERE b.token = ?",
        (token,),
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]), str(row[2]), bool(row[3]))


def settled_text(conn: sqlite3.Connection, ask_key: str) -> str | None:
    """The text of the row that settled the ask (how it was closed, as the ledger said), or
    None when it was not settled through the door."""
    row = conn.execute("SELECT settle_text FROM asks WHERE ask_key = ?", (ask_key,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def ask_by_message(
    conn: sqlite3.Connection, chat_id: int, message_id: int
) -> tuple[str, int, list[str], bool] | None:
    """(ask key, request id, choices, void) of the ask a Telegram message rang; None when that
    message rang no ask."""
    row = conn.execute(
        "SELECT a.ask_key, a.request_id, a.choices, a.voided_at IS NOT NULL FROM ask_messages m "
        "JOIN asks a ON a.ask_key = m.ask_key WHERE m.chat_id = ? AND m.message_id = ?",
        (chat_id, message_id),
    ).fetchone()
    if row is None:
        return None
    return str(row[0]), int(row[1]), list(json.loads(row[2])), bool(row[3])


def messages_of_ask(conn: sqlite3.Connection, ask_key: str) -> list[AskMessage]:
    """Every message that rang the ask, oldest first (the last is its newest)."""
    rows = conn.execute(
        "SELECT chat_id, message_id, text, sent_at FROM ask_messages WHERE ask_key = ? "
        "ORDER BY sent_at, rowid",
        (ask_key,),
    ).fetchall()
    return [AskMessage(chat, int(message), str(text), str(at)) for chat, message, text, at in rows]


def void_ask(conn: sqlite3.Connection, ask_key: str) -> None:
    """The ask's buttons void (its answer is taken, or it was settled), and its entries not
    yet sent never ring. Idempotent."""
    conn.execute(
        "UPDATE asks SET voided_at = ? WHERE ask_key = ? AND voided_at IS NULL",
        (utc_now(), ask_key),
    )
    conn.execute("UPDATE ask_buttons SET void = 1 WHERE ask_key = ?", (ask_key,))
    reminders.end(conn, ask_key, "settled")  # its queued reminder is dropped just below
    telegram.drop_void_asks(conn)


def deadline_decision(
    conn: sqlite3.Connection, ask_key: str
) -> tuple[float | None, str, str | None] | None:
    """(deadline, outcome, choice) of an ask its deadline decided; None for any other."""
    row = conn.execute(
        "SELECT deadline_at, settled_outcome, settled_choice FROM asks "
        "WHERE ask_key = ? AND settled_by = 'deadline'",
        (ask_key,),
    ).fetchone()
    if row is None:
        return None
    return (None if row[0] is None else float(row[0])), str(row[1]), row[2]


def settle(
    conn: sqlite3.Connection,
    ask_key: str,
    text: str,
    decided: tuple[str, str | None, str | None] | None = None,
) -> int:
    """The ask `ask_key` is settled (its request closed or abandoned, or gone from the ledger),
    told by a row (or an answer) whose text is `text`: its buttons void, and an edit queued for
    each message that rang it; no other ask, whatever its request id. Once per ask (a second
    settle changes nothing); an ask this chief.db never saw is no business of it. How many
    edits were queued. `decided`: (by, outcome, choice) of a settle by the ask's deadline."""
    row = conn.execute(
        "SELECT settled_at, request_id FROM asks WHERE ask_key = ?", (ask_key,)
    ).fetchone()
    if row is None or row[0] is not None:
        return 0
    by, outcome, choice = decided or (None, None, None)
    conn.execute(
        "UPDATE asks SET settled_at = ?, settle_text = ?, settled_by = ?, settled_outcome = ?, "
        "settled_choice = ? WHERE ask_key = ?",
        (utc_now(), text, by, outcome, choice, ask_key),
    )
    void_ask(conn, ask_key)
    messages = messages_of_ask(conn, ask_key)
    for message in messages:
        queue_edit(conn, (ask_key, int(row[1])), message, text)
    return len(messages)


def amend(conn: sqlite3.Connection, ask_key: str, text: str) -> int:
    """The settled ask `ask_key` had its outcome amended, as `text` says: the line added under
    its settle's text (what an ask that rings later shows too), and each message that rang it
    edited to show it, replacing an edit still owed. An ask not settled here (or never seen)
    has no decided message to edit. How many edits were queued. The caller runs it once per
    amending row."""
    row = conn.execute(
        "SELECT settle_text, request_id FROM asks WHERE ask_key = ? AND settled_at IS NOT NULL",
        (ask_key,),
    ).fetchone()
    if row is None:
        return 0
    settled = str(row[0]) + AMEND_SEPARATOR + text
    conn.execute("UPDATE asks SET settle_text = ? WHERE ask_key = ?", (settled, ask_key))
    messages = messages_of_ask(conn, ask_key)
    for message in messages:
        queue_edit(conn, (ask_key, int(row[1])), message, settled, replace=True)
    return len(messages)


def remember(
    conn: sqlite3.Connection, seqs: list[int], chat_id: int | str, message_id: int
) -> None:
    """The ask entries among `seqs` rang as (chat_id, message_id): remembered against their
    ask key (before the entries leave the queue). An ask settled while it was in flight gets
    its edit queued at once."""
    now = utc_now()
    for ask_key, text in telegram.keyed_entries(conn, seqs, "ask_key"):
        conn.execute(
            "INSERT OR REPLACE INTO ask_messages (chat_id, message_id, ask_key, text, "
            "sent_at) VALUES (?, ?, ?, ?, ?)",
            (chat_id, message_id, ask_key, text, now),
        )
        reminders.schedule(conn, ask_key, chat_id, message_id, time.time())  # its first ring
        row = conn.execute(
            "SELECT settle_text, request_id FROM asks WHERE ask_key = ?", (ask_key,)
        ).fetchone()
        if row is not None and row[0] is not None:
            message = AskMessage(chat_id, message_id, text, now)
            queue_edit(conn, (ask_key, int(row[1])), message, str(row[0]))


def mark_rung(
    conn: sqlite3.Connection,
    seqs: list[int],
    outbox_ids: list[str],
    telegram_message_id: int | None,
    chat_id: int | str | None,
) -> None:
    """`telegram.mark_rung`, with the asks the message carried remembered (chat_id given) in
    the same transaction."""
    if chat_id is not None and telegram_message_id is not None:
        remember(conn, seqs, chat_id, telegram_message_id)
    telegram.mark_rung(conn, seqs, outbox_ids, telegram_message_id)


def head(conn: sqlite3.Connection, limit: int, now: float) -> list[telegram.QueuedRing]:
    """`telegram.head`, each ask entry with its request's live buttons."""
    entries = telegram.head(conn, limit, now)
    return [
        entry
        if entry.ask_key is None
        else replace(entry, buttons=live_buttons(conn, entry.ask_key))
        for entry in entries
    ]


def queue_ask(conn: sqlite3.Connection, ask: Ask, text: str) -> tuple[int, int]:
    """Ring `ask` again (a reask): the request open with live buttons, and an ask entry with
    no outbox row queued; its seq and how many entries are ahead of it."""
    ensure_open(conn, ask)
    seq = telegram.insert_telegram(conn, None, text, ask.key)
    return seq, telegram.entries_ahead(conn, [seq])[seq]


def queue_edit(
    conn: sqlite3.Connection,
    ask: tuple[str, int],
    message: AskMessage,
    settled: str,
    *,
    replace: bool = False,
) -> None:
    """The edit `message` (of the ask `ask`: its key and request id) owes: its text, then
    `settled`. An urgent report's older rings lose their buttons through the same edits
    (`chief.store.urgent`, keyed by its urgent key and request id 0). `replace`: this text
    supersedes an edit still owed on the message (an amendment's), as a fresh edit."""
    verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
    conn.execute(
        f"{verb} INTO ask_edits (chat_id, message_id, ask_key, request_id, text, "
        "queued_at) VALUES (?, ?, ?, ?, ?, ?)",
        (
            message.chat_id,
            message.message_id,
            *ask,
            message.text + SETTLE_SEPARATOR + settled,
            utc_now(),
        ),
    )


def due_edits(conn: sqlite3.Connection, now: float, limit: int) -> list[AskEdit]:
    """The edits due at `now` (unix seconds), oldest first."""
    rows = conn.execute(
        "SELECT seq, chat_id, message_id, ask_key, request_id, text, attempts FROM ask_edits "
        "WHERE next_attempt_at <= ? ORDER BY seq LIMIT ?",
        (now, limit),
    ).fetchall()
    return [
        AskEdit(int(a), b, int(c), str(d), int(e), str(f), int(g)) for a, b, c, d, e, f, g in rows
    ]


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
