"""The async stores' one database-thread idiom (the Chief's `ChiefStore`, the notifier's
`Database`): one plain sqlite3 connection on one thread of its own, and every whole transaction
one hop to it, on public APIs only (a `threading.Thread`, a `queue.SimpleQueue` of calls, an
`anyio.Event` set through the caller's loop).

It imports anyio, so it is no part of the `coop` CLI's cold path. The notifier's store imports
it on the first hop: a kicked drainer that loses the lock makes no hop and exits without paying
for asyncio, anyio or threads.

Why not `anyio.to_thread.run_sync` on a `CapacityLimiter(1)`: per call it takes two checkpoints,
two cancel scopes, a context copy and a Condition-based queue, about three times this module's
event-loop CPU per hop (measured ~155 µs against ~53 µs), and the door makes several hops per
row (bench_door_batch: ~25% more door CPU per row). Why not aiosqlite: its public API runs one
statement per hop, so a transaction of N statements would cost N hops and a lock around them.
"""

from __future__ import annotations

import asyncio  # the running loop's call_soon_threadsafe: how the thread wakes a caller
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

T = TypeVar("T")

_QUEUED, _RUNNING, _SKIPPED = "queued", "running", "skipped"


class _Call:
    """One call for the connection's thread: queued, then run or skipped, never both."""

    __slots__ = ("args", "done", "error", "fn", "loop", "result", "state")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], loop: Any, done: Any) -> None:
        self.fn = fn
        self.args = args
        self.loop = loop  # the caller's event loop: `done` is set on it
        self.done = done  # an anyio.Event
        self.state = _QUEUED
        self.result: Any = None
        self.error: BaseException | None = None


class ConnectionThread:
    """One thread of its own for one sqlite3 connection: `call(fn, *args)` runs `fn(*args)`
    there, one call at a time, in the order the calls were made.

    A call, once its function started, is never abandoned: a cancelled caller waits (shielded)
    for it to finish and then raises its cancellation; a caller cancelled while its call is
    still queued takes it off, so it never runs.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._claim = threading.Lock()  # a call's state moves under it: run or skip, never both
        self._worker: threading.Thread | None = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._worker is None:
            # A daemon: a thread left waiting for calls never holds the process open.
            self._worker = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._worker.start()
        job = _Call(fn, args, asyncio.get_running_loop(), anyio.Event())
        self._calls.put(job)
        try:
            await job.done.wait()
        except BaseException:  # cancelled: the call runs whole or not at all
            with self._claim:
                started = job.state != _QUEUED
                if not started:
                    job.state = _SKIPPED
            if started:
                with anyio.CancelScope(shield=True):
                    await job.done.wait()
            raise
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    def stop(self) -> None:
        """The thread ends after the calls already queued; a later `call` starts a new one."""
        if self._worker is not None:
            self._calls.put(None)
            self._worker = None

    def _serve(self) -> None:
        while (job := self._calls.get()) is not None:
            with self._claim:
                if job.state == _SKIPPED:
                    continue
                job.state = _RUNNING
            try:
                job.result = job.fn(*job.args)
            except BaseException as exc:  # handed to the caller, raised there
                job.error = exc
            # RuntimeError: the caller's loop has closed, nobody waits for this call.
            with contextlib.suppress(RuntimeError):
                job.loop.call_soon_threadsafe(job.done.set)
