"""Bounded waits on a condition: the suite's only way to synchronise with other tasks
and processes (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

POLL_S = 0.01


class WaitTimeout(AssertionError):
    """A bounded wait ran out, or a harness process did not come up: a failed test under
    pytest (an AssertionError), and one line of a bench script's output (`bench: ...`)."""


def wait_until_sync(
    condition: Callable[[], T], *, timeout_s: float = 10.0, what: str = "", poll_s: float = POLL_S
) -> T:
    """Return the first truthy value of `condition()`, or fail after `timeout_s` (a coarser
    `poll_s` for waits of minutes, whose condition costs more than the wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout_s:g}s waiting for {what or condition}")
        time.sleep(poll_s)


async def wait_until(
    condition: Callable[[], T | Awaitable[T]], *, timeout_s: float = 10.0, what: str = ""
) -> T:
    """Async twin for tests already inside an event loop; accepts sync or async conditions."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout_s:g}s waiting for {what or condition}")
        await anyio.sleep(POLL_S)
