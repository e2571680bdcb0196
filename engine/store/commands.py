"""The command log's SQL: the owner files every command under its request key (`coop_commands`).

`engine.owner.commands` decides what to run and what to file; this module only reads and writes the
table, inside the owner's open transaction.
"""

from __future__ import annotations

import sqlite3

from engine.store import now_iso


def lookup(conn: sqlite3.Connection, key: str) -> sqlite3.Row | None:
    found: sqlite3.Row | None = conn.execute(
        "SELECT * FROM coop_commands WHERE key = ?", (key,)
    ).fetchone()
    return found


def file(
    conn: sqlite3.Connection,
    key: str,
    method: str,
    digest: str,
    actor: str | None,
    metadata: str,
    outcome: str,
    result: str | None,
    error_type: str | None,
    error_message: str | None,
) -> None:
    """File one command's outcome (a key is filed once: the primary key refuses a second)."""
    conn.execute(
        "INSERT INTO coop_commands (key, method, input_sha256, actor, metadata, outcome, result,"
        " error_type, error_message, filed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key,
            method,
            digest,
            actor,
            metadata,
            outcome,
            result,
            error_type,
            error_message,
            now_iso(),
        ),
    )
