"""plumbing.db_thread, the async stores' one idiom (the Chief's `ChiefStore`, the notifier's
`Database`): a plain sqlite3 connection on one thread of its own, each whole transaction one
hop to it. On a real file:

- concurrent transactions from many tasks never interleave (read a counter, write it plus one:
  the count comes out exact);
- a caller cancelled while its transaction runs returns only once the transaction is over, whole;
  a caller cancelled while it waits for its turn runs nothing at all;
- an error raised on the thread is raised to its caller, and the next call runs.

Each store's words for a failed open are its own (tests/integration/chief/test_chief_store.py,
tests/integration/notifier/test_notifier_delivery.py).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from plumbing.db_thread import ConnectionThread

Hop = Callable[..., Awaitable[Any]]

RACERS = 40
# Inside the read-modify-write, long enough for an interleaving hop to slip in were the
# connection not serialised (40 x 0.5 ms: the whole race stays far below a second).
RACE_WINDOW_S = 0.0005
THREAD_WAIT_S = 5.0


@asynccontextmanager
async def hops(tmp_path: Path) -> AsyncIterator[tuple[Hop, Path]]:
    """`hop(fn, *args)` runs `fn(conn, *args)` on the thread, the connection opened there on the
    first hop, as the stores do."""
    path = tmp_path / "t.db"
    _create_tables(path)
    thread = ConnectionThread("test-db")
    opened: list[sqlite3.Connection] = []

    def run(fn: Callable[..., Any], *args: Any) -> Any:
        if not opened:
            opened.append(sqlite3.connect(path, isolation_level=None, timeout=THREAD_WAIT_S))
        return fn(opened[0], *args)

    def close() -> None:
        for conn in opened:
            conn.close()

    async def hop(fn: Callable[..., Any], *args: Any) -> Any:
        return await thread.call(run, fn, *args)

    try:
        yield hop, path
    finally:
        with anyio.CancelScope(shield=True):
            await thread.call(close)
        thread.stop()


def _create_tables(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE counter (n INTEGER NOT NULL)")
        conn.execute("INSERT INTO counter (n) VALUES (0)")
        conn.execute("CREATE TABLE marks (what TEXT NOT NULL)")


def _marks(path: Path) -> list[str]:
    """What another connection sees committed."""
    with closing(sqlite3.connect(path)) as conn:
        return [str(row[0]) for row in conn.execute("SELECT what FROM marks ORDER BY rowid")]


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        (count,) = conn.execute("SELECT n FROM counter").fetchone()
        time.sleep(RACE_WINDOW_S)
        conn.execute("UPDATE counter SET n = ?", (count + 1,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _mark(conn: sqlite3.Connection, *what: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for word in what:
        conn.execute("INSERT INTO marks (what) VALUES (?)", (word,))
    conn.execute("COMMIT")


async def test_concurrent_transactions_on_one_connection_never_interleave(tmp_path: Path) -> None:
    async with hops(tmp_path) as (hop, path):
        async with anyio.create_task_group() as tasks:
            for _ in range(RACERS):
                tasks.start_soon(hop, _bump)
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT n FROM counter").fetchone() == (RACERS,)


async def test_a_caller_cancelled_mid_transaction_returns_after_it_finished_whole(
    tmp_path: Path,
) -> None:
    started, proceed = threading.Event(), threading.Event()

    def two_marks(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO marks (what) VALUES ('first')")
        started.set()
        proceed.wait(THREAD_WAIT_S)
        conn.execute("INSERT INTO marks (what) VALUES ('second')")
        conn.execute("COMMIT")

    committed_when_the_caller_returned: list[list[str]] = []
    async with hops(tmp_path) as (hop, path):
        scope = anyio.CancelScope()

        async def caller() -> None:
            try:
                with scope:
                    await hop(two_marks)
            finally:
                committed_when_the_caller_returned.append(_marks(path))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(caller)
            assert await anyio.to_thread.run_sync(started.wait, THREAD_WAIT_S)
            scope.cancel()
            await anyio.wait_all_tasks_blocked()  # a caller that ignores its hop returns here
            proceed.set()
        assert committed_when_the_caller_returned == [["first", "second"]]


async def test_a_caller_cancelled_while_waiting_its_turn_runs_nothing(tmp_path: Path) -> None:
    started, proceed = threading.Event(), threading.Event()

    def block(conn: sqlite3.Connection) -> None:
        started.set()
        proceed.wait(THREAD_WAIT_S)

    async with hops(tmp_path) as (hop, path):
        scope = anyio.CancelScope()

        async def waiter() -> None:
            with scope:
                await hop(_mark, "queued")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hop, block)
            assert await anyio.to_thread.run_sync(started.wait, THREAD_WAIT_S)
            tasks.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()  # the waiter waits for the connection
            scope.cancel()
            await anyio.wait_all_tasks_blocked()
            proceed.set()
        await hop(_mark, "after")  # runs after anything that was still queued
        assert scope.cancelled_caught
        assert _marks(path) == ["after"]


async def test_an_error_on_the_thread_is_the_callers_and_the_next_call_runs(
    tmp_path: Path,
) -> None:
    def refused(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO nowhere VALUES (1)")

    async with hops(tmp_path) as (hop, path):
        with pytest.raises(sqlite3.OperationalError, match="no such table: nowhere"):
            await hop(refused)
        await hop(_mark, "next")
        assert _marks(path) == ["next"]
