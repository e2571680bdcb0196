"""Per-key anyio locks that exist only while someone holds or waits on them.

`KeyedLocks`: the door's sender task holds the lock of every outbox row a Telegram message
carries from the send to the sent mark, so nothing else may ring or mark those rows meanwhile.
An entry is dropped the moment its last holder or waiter leaves (cancelled waiters included), so
the table is bounded by the requests in flight, never by the rows ever seen.

The single-instance lock of `chief serve` is `chief.serve_lock.ServeLock`, below the door and
cron, which both take it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio


@dataclass
class _Entry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0


class KeyedLocks:
    """One lock per key; `async with locks.hold(key):` serialises callers of the same key."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """How many keys have a holder or a waiter right now."""
        return len(self._entries)

    def waiting(self, key: str) -> int:
        """Holders plus waiters of `key` (0 when it has no entry)."""
        entry = self._entries.get(key)
        return entry.users if entry else 0

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        # The count moves before the first await, so no other task can see an entry with no
        # users that is about to be used (the event loop switches tasks only at an await).
        entry = self._entries.setdefault(key, _Entry())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0 and self._entries.get(key) is entry:
                del self._entries[key]
