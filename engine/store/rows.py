"""The row types the queue hands the notifier and status: the head pending row, the
`worker_lock` row and one outcome of a batch.

Apart from `engine.store.queue` so that a producer's cold path (a `coop` verb enqueues, it never
reads a head) does not load `typing` to build them.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Head(NamedTuple):
    """The head pending row, as the drain needs it."""

    id: int
    kind: str
    text: str
    attempts: int
    next_attempt_at: float
    delivery_key: str  # what the door deduplicates the row by: its `outbox_id`
    # The fields the door needs beside the text (`ask`, `settles`, `ring`), or None: an
    # ordinary row, whose body is exactly the three fields above.
    extra: dict[str, Any] | None = None


class LockRow(NamedTuple):
    """The `worker_lock` row: who holds it, and since when."""

    owner: str
    pid: int
    host: str
    started_at: float | None
    acquired_at: str


class Delivery(NamedTuple):
    """One row's outcome in a batch: delivered (`next_attempt_at` None) or deferred to it."""

    outbox_id: int
    answer: str | None
    next_attempt_at: float | None = None
    error: str | None = None
