"""engine/, notifier/ and chief/ use libraries through their public APIs, and anyio's primitives.

Walks each module's syntax tree (a docstring or comment that mentions a name does not count)
and fails on:

- a private attribute we know third-party objects have (aiosqlite's `_execute`, `_conn`,
  `_thread`, ...) read off anything but `self`: our own classes may name their own attributes
  so, and read them through `self`;
- a thread pool of our own (`run_in_executor`, `ThreadPoolExecutor`): a store's connection has
  one thread, and a transaction is one hop to it (`plumbing.db_thread`);
- asyncio's primitives (locks, events, queues, sleeps, tasks) where anyio has its own: the
  packages run under anyio, whose cancel scopes asyncio's primitives do not know.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief", "plumbing")

# Private attributes of third-party objects that this code base has reached for before.
PRIVATE_ATTRIBUTES = frozenset({"_execute", "_conn", "_thread", "_connection", "_tx", "_running"})
EXECUTORS = frozenset({"run_in_executor", "ThreadPoolExecutor", "ProcessPoolExecutor"})
ASYNCIO_PRIMITIVES = frozenset(
    {
        "Lock",
        "Event",
        "Condition",
        "Semaphore",
        "BoundedSemaphore",
        "Queue",
        "sleep",
        "create_task",
        "ensure_future",
        "gather",
        "wait",
        "wait_for",
        "shield",
        "timeout",
        "TaskGroup",
    }
)


def violations(source: str) -> list[str]:
    """`line: what` for every forbidden use in `source`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if node.attr in PRIVATE_ATTRIBUTES and not (
                isinstance(owner, ast.Name) and owner.id == "self"
            ):
                found.append(f"{node.lineno}: private attribute .{node.attr}")
            if node.attr in EXECUTORS:
                found.append(f"{node.lineno}: thread executor .{node.attr}")
            if (
                isinstance(owner, ast.Name)
                and owner.id == "asyncio"
                and node.attr in ASYNCIO_PRIMITIVES
            ):
                found.append(f"{node.lineno}: asyncio.{node.attr} (use anyio's)")
        elif isinstance(node, ast.Name) and node.id in EXECUTORS:
            found.append(f"{node.lineno}: thread executor {node.id}")
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in EXECUTORS:
                    found.append(f"{node.lineno}: thread executor {alias.name}")
                if node.module == "asyncio" and alias.name in ASYNCIO_PRIMITIVES:
                    found.append(f"{node.lineno}: asyncio.{alias.name} (use anyio's)")
    return sorted(set(found), key=lambda text: (int(text.split(":", 1)[0]), text))


def test_the_scan_sees_uses_and_ignores_text_and_self() -> None:
    source = (
        '"""db._execute(fn) and asyncio.Lock() in a docstring"""\n'
        "# loop.run_in_executor(None, fn)\n"
        "self._conn = None\n"
        "db._execute(lambda: fn(db._conn))\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "lock = asyncio.Lock()\n"
        "from asyncio import Event\n"
        "loop.run_in_executor(None, fn)\n"
    )
    assert violations(source) == [
        "4: private attribute ._conn",
        "4: private attribute ._execute",
        "5: thread executor ThreadPoolExecutor",
        "6: asyncio.Lock (use anyio's)",
        "7: asyncio.Event (use anyio's)",
        "8: thread executor .run_in_executor",
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_public_apis_and_anyio_primitives_only(package: str) -> None:
    found = {
        str(path.relative_to(ROOT)): hits
        for path in sorted((ROOT / package).rglob("*.py"))
        if (hits := violations(path.read_text(encoding="utf-8")))
    }
    assert not found, (
        "private library attributes, a thread executor of our own, or asyncio primitives "
        "in anyio code: " + "; ".join(f"{path}: {', '.join(hits)}" for path, hits in found.items())
    )
