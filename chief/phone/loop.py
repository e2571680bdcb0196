"""The phone's task loop, the shape its background tasks share: the Telegram sender
(`ringer.Ringer`), the ask task (`asks.Asks`), the poller (`updater.PhoneLoop`) and the nag task
(`jobqueue.Nagger`).

Each runs turns until it is stopped: `_step()` does one turn and says how long to pause after it
(0: at once; `math.inf`: until nudged). A `nudge()` cuts the pause short, a `stop()` ends the
loop after the turn in flight, and a turn that raises is logged with its task's event name and
retried after `_retry_s()`: a task outlives any one failure. The traceback is logged once per
outage (the same error again is counted, not logged again; a turn that ends well closes it).
`stopped` is set when `run` has returned. `running_task(task, bound_s)` runs one inside a block
and, on leaving it, lets the turn in flight finish within the bound before the task is
cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

import anyio
import anyio.abc
import structlog

log = structlog.get_logger("chief.door")


class DoorLoop:
    """A task of the door: a turn, then a pause that a nudge or a stop cuts short."""

    #: the log event of a turn that raised (each task keeps its own, operators search for it)
    failed_event = "door.task_failed"

    def __init__(self) -> None:
        self._wake = anyio.Event()
        self._stopping = False
        # The failure of the turns failing now (its words), and how many failed so far.
        self._failing: str | None = None
        self._failed_turns = 0
        #: set when `run` has returned (after `stop()`, the turn in flight finished)
        self.stopped = anyio.Event()

    def nudge(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Turn until `stop()`."""
        await self._before_start()
        task_status.started()
        try:
            await self._after_start()
            while not self._stopping:
                try:
                    pause_s = await self._step()
                except Exception as exc:  # the task must outlive any one failure
                    self._turn_failed(exc)
                    pause_s = self._retry_s()
                else:
                    self._turn_ended_well()
                if pause_s > 0 and not self._stopping:
                    await self._pause(pause_s)
        finally:
            self.stopped.set()

    def _turn_failed(self, exc: Exception) -> None:
        """Log a failed turn's traceback once per outage: a turn retried every second must not
        fill the log with the same traceback."""
        words = f"{type(exc).__name__}: {exc}"
        self._failed_turns += 1
        if words != self._failing:
            self._failing = words
            log.exception(self.failed_event, error=str(exc), retry_in_s=self._retry_s())

    def _turn_ended_well(self) -> None:
        if self._failing is not None:
            log.info(self.failed_event + "_over", failed_turns=self._failed_turns)
        self._failing, self._failed_turns = None, 0

    async def _before_start(self) -> None:
        """What the task reads before its starter goes on (nothing by default)."""

    async def _after_start(self) -> None:
        """What the task does once, before its first turn (nothing by default)."""

    async def _step(self) -> float:
        """One turn; how long to pause after it."""
        raise NotImplementedError

    def _retry_s(self) -> float:
        """The pause after a turn that raised."""
        raise NotImplementedError

    async def _pause(self, seconds: float) -> None:
        wake = self._wake
        with anyio.move_on_after(seconds):
            await wake.wait()
        if wake is self._wake and wake.is_set():
            self._wake = anyio.Event()


Loop = TypeVar("Loop", bound=DoorLoop)


@asynccontextmanager
async def running_task(task: Loop, bound_s: float) -> AsyncIterator[Loop]:
    """Run `task` for the block; on exit let its turn in flight finish (a send and its mark, an
    edit; within `bound_s`), then cancel it. Work not done stays queued for the next start."""
    async with anyio.create_task_group() as tasks:
        await tasks.start(task.run)
        try:
            yield task
        finally:
            task.stop()
            with anyio.move_on_after(bound_s, shield=True):
                await task.stopped.wait()
            tasks.cancel_scope.cancel()
