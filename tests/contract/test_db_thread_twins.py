"""The database-thread twins: `chief.db_thread` and `notifier.db_thread`.

The packages share no code, so each keeps its own copy of one idiom: a plain sqlite3 connection
on one thread of its own, each whole transaction one hop to it. The same checks run on both
copies, through `ChiefStore` and `Database`, on real files:

- concurrent transactions from many tasks never interleave (read a counter, write it plus one:
  the count comes out exact);
- a caller cancelled while its transaction runs returns only once the transaction is over, whole;
  a caller cancelled while it waits for its turn runs nothing at all;
- a failed open is one line of the package's own error.
"""

from __future__ import annotations

import ast
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

from chief.errors import ChiefStoreError
from chief.store import ChiefStore
from engine import store as engine_store
from notifier.delivery import Database, open_own_connection
from notifier.errors import StoreError

Hop = Callable[..., Awaitable[Any]]

RACERS = 40
# Inside the read-modify-write, long enough for an interleaving hop to slip in were the
# connection not serialised (40 x 0.5 ms: the whole race stays far below a second).
RACE_WINDOW_S = 0.0005
THREAD_WAIT_S = 5.0


@asynccontextmanager
async def chief_hops(tmp_path: Path) -> AsyncIterator[tuple[Hop, Path]]:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        _create_tables(path)
        yield store._hop, path


@asynccontextmanager
async def notifier_hops(tmp_path: Path) -> AsyncIterator[tuple[Hop, Path]]:
    path = tmp_path / "coop.db"
    engine_store.open_connection(path).close()
    _create_tables(path)
    db = Database(lambda: open_own_connection(path))
    try:
        yield db.call, path
    finally:
        await db.aclose()


TWINS = {"chief": chief_hops, "notifier": notifier_hops}


def _create_tables(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE IF NOT EXISTS counter (n INTEGER NOT NULL)")
        conn.execute("INSERT INTO counter (n) VALUES (0)")
        conn.execute("CREATE TABLE IF NOT EXISTS marks (what TEXT NOT NULL)")


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


@pytest.mark.parametrize("twin", TWINS)
async def test_concurrent_transactions_on_one_connection_never_interleave(
    twin: str, tmp_path: Path
) -> None:
    async with TWINS[twin](tmp_path) as (hop, path):
        async with anyio.create_task_group() as tasks:
            for _ in range(RACERS):
                tasks.start_soon(hop, _bump)
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT n FROM counter").fetchone() == (RACERS,)


@pytest.mark.parametrize("twin", TWINS)
async def test_a_caller_cancelled_mid_transaction_returns_after_it_finished_whole(
    twin: str, tmp_path: Path
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
    async with TWINS[twin](tmp_path) as (hop, path):
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


@pytest.mark.parametrize("twin", TWINS)
async def test_a_caller_cancelled_while_waiting_its_turn_runs_nothing(
    twin: str, tmp_path: Path
) -> None:
    started, proceed = threading.Event(), threading.Event()

    def block(conn: sqlite3.Connection) -> None:
        started.set()
        proceed.wait(THREAD_WAIT_S)

    async with TWINS[twin](tmp_path) as (hop, path):
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


async def test_chief_open_failure_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    path.mkdir()  # a folder where the file should be
    with pytest.raises(ChiefStoreError) as caught:
        async with ChiefStore.open(path):
            pass
    assert str(caught.value).startswith(f"cannot open chief.db at {path}: ")
    assert "\n" not in str(caught.value)


async def test_chief_use_after_close_names_the_block(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        pass
    with pytest.raises(ChiefStoreError, match="is closed — use the Chief inside its `async with`"):
        await store.owners()


async def test_notifier_open_failure_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "coop.db"
    path.mkdir()  # a folder where the file should be
    db = Database(lambda: open_own_connection(path))
    try:
        with pytest.raises(StoreError) as caught:
            await db.call(_mark, "never")
    finally:
        await db.aclose()
    assert str(caught.value).startswith("cannot open the Coop database: ")
    assert "\n" not in str(caught.value)


def test_the_two_modules_are_the_same_code() -> None:
    """The twins differ in their module docstring only (which names the other one)."""
    root = Path(__file__).resolve().parents[2]

    def code(package: str) -> list[str]:
        tree = ast.parse((root / package / "db_thread.py").read_text())
        body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body
        return [ast.dump(node) for node in body]

    assert code("chief") == code("notifier")
