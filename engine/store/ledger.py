"""The ledger's SQL: every statement on `todos`, `requests` and the append-only `coop_events`.

The verbs (`engine.verbs`) decide; this module only reads and writes, inside the caller's open
transaction (`engine.store.write`). Each change of a row is one guarded UPDATE whose WHERE
clause carries the state the verb read, and reports whether it applied: zero rows means someone
moved the row between the read and the write, which the verb turns into its refusal.
"""

from __future__ import annotations

import json
import os
import sqlite3

from engine.lifecycle import TABLES
from engine.store import now_iso
from engine.store.schema import ASK_KEY_BYTES, ASK_KEY_PREFIX

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays off the CLI's path
if TYPE_CHECKING:
    from typing import Any


def record_event(
    conn: sqlite3.Connection,
    item_kind: str,
    item_id: int,
    event: str,
    actor: str,
    payload: dict[str, Any] | None = None,
    at: str | None = None,
) -> int:
    """Append one row to the event log (never updated, never deleted)."""
    cur = conn.execute(
        "INSERT INTO coop_events (item_kind, item_id, event, actor, at, payload)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            item_kind,
            item_id,
            event,
            actor,
            at or now_iso(),
            json.dumps(payload, sort_keys=True) if payload is not None else None,
        ),
    )
    return int(cur.lastrowid or 0)


def events(conn: sqlite3.Connection, kind: str, item_id: int) -> list[dict[str, Any]]:
    """The event log of one row, oldest first."""
    return [
        dict(r)
        for r in conn.execute(
            "SELECT * FROM coop_events WHERE item_kind = ? AND item_id = ? ORDER BY id",
            (kind, item_id),
        )
    ]


def load(conn: sqlite3.Connection, kind: str, item_id: int) -> sqlite3.Row | None:
    found: sqlite3.Row | None = conn.execute(
        f"SELECT * FROM {TABLES[kind]} WHERE id = ?", (item_id,)
    ).fetchone()
    return found


def new_ask_key() -> str:
    """A fresh ask key (`engine.store.schema`, migration 4): random, never the request's id."""
    return ASK_KEY_PREFIX + os.urandom(ASK_KEY_BYTES).hex()


#: A request's options stored as given (`urgent` is stored as 0 or 1).
_OPTION_COLUMNS = ("deadline_at", "default_choice", "remind_every_s", "remind_max")


def insert(
    conn: sqlite3.Connection,
    kind: str,
    title: str,
    body: str | None,
    addressed_to: str | None,
    actor: str,
    at: str,
    choices: list[str] | None = None,
    ask_key: str | None = None,
    options: dict[str, Any] | None = None,
) -> int:
    """A new open todo or request (a request's `choices` stored as a JSON list, its `ask_key`
    when it is filed to the owner's phone, and its `options`: `deadline_at`, `default_choice`,
    `remind_every_s`, `remind_max`, `urgent`); its id."""
    given = options or {}
    if kind == "todo":
        cur = conn.execute(
            "INSERT INTO todos (title, body, created_by, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (title, body, actor, at, at),
        )
    else:
        cur = conn.execute(
            "INSERT INTO requests (title, body, addressed_to, created_by, created_at,"
            " updated_at, choices, ask_key, deadline_at, default_choice, remind_every_s,"
            " remind_max, urgent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                title,
                body,
                addressed_to,
                actor,
                at,
                at,
                None if not choices else json.dumps(choices),
                ask_key,
                *(given.get(name) for name in _OPTION_COLUMNS),
                1 if given.get("urgent") else 0,
            ),
        )
    return int(cur.lastrowid or 0)


def take(
    conn: sqlite3.Connection, kind: str, item_id: int, actor: str, at: str, force: bool
) -> bool:
    """Claim the row for `actor`: still open or still theirs, or (force) open or taken."""
    # The claim is decided here, by the database: still open, or still ours.
    guard = "status IN ('open', 'taken')" if force else "(status = 'open' OR taken_by = ?)"
    params: tuple[Any, ...] = (actor, at, at, item_id) + (() if force else (actor,))
    cur = conn.execute(
        f"UPDATE {TABLES[kind]} SET status = 'taken', taken_by = ?, taken_at = ?,"
        f" updated_at = ? WHERE id = ? AND {guard}",
        params,
    )
    return cur.rowcount == 1


def _guarded_update(
    conn: sqlite3.Connection, kind: str, row: sqlite3.Row, sets: str, params: tuple[Any, ...]
) -> bool:
    """Apply `sets` only if the row is still as read."""
    cur = conn.execute(
        f"UPDATE {TABLES[kind]} SET {sets}, updated_at = ?"
        " WHERE id = ? AND status = ? AND taken_by IS ?",
        (*params, now_iso(), row["id"], row["status"], row["taken_by"]),
    )
    return cur.rowcount == 1


def release(conn: sqlite3.Connection, kind: str, row: sqlite3.Row) -> bool:
    return _guarded_update(conn, kind, row, "status = 'open', taken_by = NULL, taken_at = NULL", ())


def finish(
    conn: sqlite3.Connection,
    kind: str,
    row: sqlite3.Row,
    target: str,
    actor: str,
    at: str,
    result_summary: str | None,
    commit_sha: str | None,
) -> bool:
    """done or close: the row records who finished it (and, on a fast path, who took it)."""
    return _guarded_update(
        conn,
        kind,
        row,
        "status = ?, taken_by = COALESCE(taken_by, ?), taken_at = COALESCE(taken_at, ?),"
        " closed_by = ?, closed_at = ?, result_summary = ?, commit_sha = ?",
        (target, actor, at, actor, at, result_summary, commit_sha),
    )


def abandon(
    conn: sqlite3.Connection, kind: str, row: sqlite3.Row, actor: str, at: str, reason: str
) -> bool:
    return _guarded_update(
        conn,
        kind,
        row,
        "status = 'abandoned', closed_by = ?, closed_at = ?, reason = ?",
        (actor, at, reason),
    )


def amend(
    conn: sqlite3.Connection,
    kind: str,
    item_id: int,
    result_summary: str | None,
    commit_sha: str | None,
) -> None:
    """Fill in or correct a finished row's outcome (None leaves a field as it is)."""
    conn.execute(
        f"UPDATE {TABLES[kind]} SET result_summary = COALESCE(?, result_summary),"
        " commit_sha = COALESCE(?, commit_sha), updated_at = ? WHERE id = ?",
        (result_summary, commit_sha, now_iso(), item_id),
    )


def items(conn: sqlite3.Connection, kind: str, include_closed: bool) -> list[sqlite3.Row]:
    """One kind's rows by id; open and taken ones only unless `include_closed`."""
    where = "" if include_closed else " WHERE status IN ('open', 'taken')"
    return conn.execute(f"SELECT * FROM {TABLES[kind]}{where} ORDER BY id").fetchall()


def counts(conn: sqlite3.Connection, kind: str) -> dict[str, int]:
    """One kind's rows by status (only the statuses that occur)."""
    return {
        str(r[0]): int(r[1])
        for r in conn.execute(f"SELECT status, COUNT(*) FROM {TABLES[kind]} GROUP BY 1")
    }


def taken(conn: sqlite3.Connection, kind: str) -> list[sqlite3.Row]:
    """One kind's taken rows: id, title, taker and since when."""
    return conn.execute(
        f"SELECT id, title, taken_by, taken_at FROM {TABLES[kind]} WHERE status = 'taken'"
    ).fetchall()


def last_event(
    conn: sqlite3.Connection, kind: str, item_id: int, names: tuple[str, ...]
) -> dict[str, Any] | None:
    """One row's latest event among `names` (its payload decoded), or None."""
    marks = ", ".join("?" for _ in names)
    found = conn.execute(
        f"SELECT * FROM coop_events WHERE item_kind = ? AND item_id = ? AND event IN ({marks})"
        " ORDER BY id DESC LIMIT 1",
        (kind, item_id, *names),
    ).fetchone()
    if found is None:
        return None
    event = dict(found)
    event["payload"] = json.loads(event["payload"]) if event["payload"] else None
    return event


def open_items(conn: sqlite3.Connection, kind: str, limit: int) -> tuple[int, list[sqlite3.Row]]:
    """How many of one kind are open or taken, and the oldest `limit` of them, oldest first."""
    table = TABLES[kind]
    (count,) = conn.execute(
        f"SELECT COUNT(*) FROM {table} WHERE status IN ('open', 'taken')"
    ).fetchone()
    rows = conn.execute(
        f"SELECT * FROM {table} WHERE status IN ('open', 'taken') ORDER BY created_at, id LIMIT ?",
        (limit,),
    ).fetchall()
    return int(count), rows


def open_deadlines(conn: sqlite3.Connection, now_s: float) -> tuple[list[int], float | None]:
    """The open (or taken) requests whose deadline has come by `now_s`, earliest first, and
    the earliest deadline still ahead (None: none), both on the partial index."""
    due = [
        int(row[0])
        for row in conn.execute(
            "SELECT id FROM requests WHERE deadline_at IS NOT NULL AND status IN ('open', 'taken')"
            " AND deadline_at <= ? ORDER BY deadline_at, id",
            (now_s,),
        )
    ]
    (ahead,) = conn.execute(
        "SELECT MIN(deadline_at) FROM requests WHERE deadline_at IS NOT NULL"
        " AND status IN ('open', 'taken') AND deadline_at > ?",
        (now_s,),
    ).fetchone()
    return due, None if ahead is None else float(ahead)
