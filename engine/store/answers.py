"""The phone's answers' SQL: every statement on `coop_answers`, the log that makes an answer
from the phone apply exactly once.

An answer is filed under the key the door gave it, in the same transaction as what it did
(`engine.verbs.phone.answer_request`): a key seen before answers its filed outcome and changes
nothing more, however often the door sends it again (a retry after a lost answer, a crash of
`coop serve` between the commit and the reply, an update Telegram delivers twice).
"""

from __future__ import annotations

import sqlite3


def find(conn: sqlite3.Connection, answer_key: str) -> sqlite3.Row | None:
    """The filed answer under `answer_key`, or None."""
    found: sqlite3.Row | None = conn.execute(
        "SELECT answer_key, request_id, outcome, detail, at FROM coop_answers WHERE answer_key = ?",
        (answer_key,),
    ).fetchone()
    return found


def file(
    conn: sqlite3.Connection, answer_key: str, request_id: int, outcome: str, detail: str, at: str
) -> None:
    """File one answer's outcome (the key is new: the caller looked it up in this transaction)."""
    conn.execute(
        "INSERT INTO coop_answers (answer_key, request_id, outcome, detail, at)"
        " VALUES (?, ?, ?, ?, ?)",
        (answer_key, request_id, outcome, detail, at),
    )
