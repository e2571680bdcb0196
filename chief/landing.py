"""How a report lands: the one hop that accepts it and, when the caller may, lands it, and the
reporters waiting for their keys to land.

    accept_and_land(transactions, chief_id, rows, queue_telegram, land)   one hop (the store's
                        `in_one_hop`): the accept transaction, then at most one landing
    Landings            the waiters per key: registered before the accept, told by `announce`

The decisions of a report live here, the statements in chief.store: a row already landed
answers its message id and lands nothing; a row accepted is durable (FULL) before anything
else happens (the fault point `chief.report.after_insert` sits right after that commit); the
landing runs only when the caller holds the turn lock with the drainer idle, lands the queue
in outbox order as a drain pass would, and, when it fails, leaves the rows queued for the
drainer (`land_error`) instead of failing the report that is already durable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio

from chief.errors import ChiefStoreError
from chief.store import Accepted, ReportRow, Transactions
from plumbing.faults import fault

# Rows landed per landing transaction: bounds how long one pass holds the turn lock.
DRAIN_BATCH_ROWS = 256


@dataclass(frozen=True)
class ReportHop:
    """What one report hop did: one `Accepted` per row, in order, and the landing after it."""

    rows: list[Accepted]
    landed: list[tuple[str, int]] = field(default_factory=list)  # (key, id) landed, in order
    more: bool = False  # the landing batch was full: more rows may wait
    land_error: str | None = None  # the landing failed and rolled back; the rows stay queued

    @property
    def unlanded(self) -> bool:
        """Some row had not landed before this hop."""
        return any(row.message_id is None for row in self.rows)


def accept_and_land(
    transactions: Transactions,
    chief_id: int,
    rows: list[ReportRow],
    queue_telegram: bool,
    land: Callable[[str], str] | None,
) -> ReportHop:
    """Accept every row in ONE transaction (all or none), then, with `land` (the turn kind of a
    key; the caller holds the turn lock and the drainer is idle), land up to DRAIN_BATCH_ROWS
    undelivered rows in outbox order in one transaction, as a drain pass would."""
    accepted = transactions.accept(chief_id, rows, queue_telegram)
    hop = ReportHop(accepted)
    if not hop.unlanded:
        return hop
    # Every row is committed (FULL): from here each line survives a crash.
    fault("chief.report.after_insert")
    if land is None:
        return hop
    try:
        landed, more = transactions.land(chief_id, land, DRAIN_BATCH_ROWS)
    except ChiefStoreError as exc:
        return ReportHop(accepted, land_error=str(exc))
    return ReportHop(accepted, landed, more)


@dataclass
class _Landing:
    """What the reporters of one key wait on; `announce` fills it in when the key lands."""

    event: anyio.Event = field(default_factory=anyio.Event)
    message_id: int | None = None
    waiters: int = 0


class Landings:
    """The reporters waiting for their keys to land, per key. A reporter registers its keys
    before it accepts them, so a landing that happens before it starts waiting is still seen;
    the entry of a key leaves with its last waiter."""

    def __init__(self) -> None:
        self._by_key: dict[str, _Landing] = {}

    @contextmanager
    def awaiting(self, keys: list[str]) -> Iterator[Waiting]:
        """Register `keys` for the block; `wait` on the result inside it."""
        landings = [self._by_key.setdefault(key, _Landing()) for key in keys]
        for landing in landings:
            landing.waiters += 1
        try:
            yield Waiting(landings)
        finally:
            for key, landing in zip(keys, landings, strict=True):
                landing.waiters -= 1
                if landing.waiters == 0 and self._by_key.get(key) is landing:
                    del self._by_key[key]

    def announce(self, landed: list[tuple[str, int]]) -> None:
        """Tell the waiters of each landed key its message id."""
        for key, message_id in landed:
            landing = self._by_key.pop(key, None)
            if landing is not None:
                landing.message_id = message_id
                landing.event.set()


@dataclass(frozen=True)
class Waiting:
    """The landings one reporter registered, in its rows' order."""

    landings: list[_Landing]

    async def wait(self, rows: list[Accepted], wait: float | None) -> list[int | None]:
        """Each row's message id: the one it had (landed before), else the one announced
        within `wait` seconds (None: still queued; `wait=None` waits until all landed). Waits
        on the landing events, never on the drainer: running out cancels nothing."""
        with anyio.move_on_after(math.inf if wait is None else max(wait, 0.0)):
            for row, landing in zip(rows, self.landings, strict=True):
                if row.message_id is None:
                    await landing.event.wait()
        return [
            row.message_id if row.message_id is not None else landing.message_id
            for row, landing in zip(rows, self.landings, strict=True)
        ]
