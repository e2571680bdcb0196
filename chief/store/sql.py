"""The transaction and the small helpers every table's statements use."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def write(conn: sqlite3.Connection, fn: Callable[..., T], *args: Any) -> T:
    """Run `fn` inside BEGIN IMMEDIATE on the connection thread; roll back unless it finishes."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


def scalar(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def found(
    conn: sqlite3.Connection, select: str, keys: list[str], column: str = "outbox_id"
) -> dict[str, Any]:
    """`select` (two columns: the key, a value) for the rows whose `column` is one of `keys`,
    as {key: value}. One statement for the whole list (SQLite takes 32,766 parameters; a batch
    is at most 256 rows)."""
    if not keys:
        return {}
    marks = ", ".join("?" * len(keys))
    return dict(conn.execute(f"{select} WHERE {column} IN ({marks})", keys).fetchall())
