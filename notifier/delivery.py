"""The notifier's use cases on the ledger: outbox delivery state and the `worker_lock` row.

Every use case is one `BEGIN IMMEDIATE` transaction, run whole in one call on the connection's
own thread (`Database.call`): one thread hop per transaction, never a transaction held open
across an await. The notifier writes nothing else in the ledger.

The SQL itself, and the queue predicate the drain and the idle handoff share (the head pending
row, due when never attempted or when its time has come, the clock read inside the
transaction), are `engine.store.queue`'s: one module owns the two tables' statements for every
package. This module decides (who holds the lock, whether a holder is provably gone) and maps
the rows to the notifier's types.

sqlite3 errors, and the engine's store errors (at open and at each write), are translated here
into `notifier.errors.StoreError`, the notifier's one store error: no notifier module names
the engine's.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from engine import store as engine_store
from engine.errors import CoopError
from engine.store import open_connection, queue, rows
from notifier.errors import LockLost, StoreError
from notifier.holder import Holder, why_gone
from notifier.outcome import Delivered, Outcome
from plumbing.faults import fault

if TYPE_CHECKING:
    from plumbing.db_thread import ConnectionThread

T = TypeVar("T")


class IdleHandoff(enum.Enum):
    """What `release_worker_if_idle` decided, atomically with the queue recheck."""

    WORK_AVAILABLE = "work_available"  # a due row exists: the lock is kept, drain on
    RELEASED = "released"  # nothing due: the lock is deleted, stop


#: The head pending row as the drain sees it: the queue's own row type, one shape for both.
OutboxRow = rows.Head


@dataclass(frozen=True)
class Claim:
    """The result of one check-and-claim of the worker lock."""

    acquired: bool
    holder: Holder | None = None  # the live holder, when not acquired
    taken_over_from: Holder | None = None  # the dead holder, when taken over
    reason: str | None = None  # why that holder is provably gone


class Database:
    """The notifier's one connection to the ledger, on one thread of its own.

    `connect` is called on that thread the first time the connection is needed, and the
    connection is used on that thread only; the notifier's processes pass
    `open_own_connection`, and the owner service may hand in a factory of its own fenced
    connections. Every `call` is one whole transaction in one hop (`plumbing.db_thread`: no
    other call interleaves; a cancelled caller's call runs whole or not at all).
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._db_thread: ConnectionThread | None = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` — one whole transaction — on the connection's thread."""
        if self._db_thread is None:
            # Imported on the first hop: a drainer that loses the lock never pays for it.
            from plumbing.db_thread import ConnectionThread

            self._db_thread = ConnectionThread("notifier-db")
        return await self._db_thread.call(self._run, fn, args)

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        # On the connection's thread.
        if self._conn is None:
            self._conn = open_with(self._connect)
        return fn(self._conn, *args)

    async def aclose(self) -> None:
        """Close the connection after the calls already queued (a later `call` reopens it)."""
        db_thread, self._db_thread = self._db_thread, None
        if db_thread is None:
            return
        import anyio

        # Shielded: a cancelled owner still closes the connection.
        with anyio.CancelScope(shield=True):
            await db_thread.call(self._close_conn)
        db_thread.stop()

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def open_own_connection(path: Path) -> sqlite3.Connection:
    """The notifier's own connection: the engine's, with `synchronous = NORMAL`.

    Only the notifier's own commits are affected (the setting is per connection). In WAL mode,
    NORMAL skips the fsync per commit; a power cut may lose the last delivery marks, and then
    the row is posted again: at-least-once, deduplicated by the door per outbox id. A lost
    deferral only makes a retry come sooner. Producers keep FULL, so the rows themselves and
    the changes they report are as durable as before. It halves the notifier's cost per row.
    """
    return open_with(lambda: open_connection(path, synchronous="NORMAL"))


def open_with(connect: Callable[[], sqlite3.Connection]) -> sqlite3.Connection:
    try:
        return connect()
    except CoopError as exc:
        said = str(exc)  # the engine's own words may already say so: never twice in a line
        prefix = (
            ""
            if said.startswith("cannot open the Coop database")
            else "cannot open the Coop database: "
        )
        raise StoreError(f"{prefix}{said}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the Coop database: {exc}") from exc


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """The engine's one write transaction (`engine.store.write`: `BEGIN IMMEDIATE`, commit when
    the block finishes, roll back otherwise), its failures raised as the notifier's. The engine
    raises its own error tree (`CoopError`: its store error) only here and at open."""
    try:
        with engine_store.write(conn):
            yield conn
    except CoopError as exc:
        raise StoreError(exc.message) from exc


def owner_service_drains(db_path: Path) -> bool:
    """Whether an owner file puts the ledger in service mode, where only the owner service's
    embedded daemon may drain it (any other writer is fenced out). A broken owner file fails
    closed, as everywhere: `StoreError`."""
    from engine.owner import owner_config

    try:
        return owner_config(db_path) is not None
    except (CoopError, ValueError, KeyError) as exc:
        raise StoreError(f"the owner file of {db_path} cannot be used: {exc}") from exc


def fence_refuses(conn: sqlite3.Connection) -> bool:
    """Whether the cutover's fence refuses this connection's writes (`engine.store`): only the
    owner service's connections pass it."""
    try:
        return engine_store.fence_refuses(conn)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the Coop database's schema: {exc}") from exc


# -- the queue -----------------------------------------------------------------------------


def head(conn: sqlite3.Connection) -> OutboxRow | None:
    """The head pending row, due or not (the daemon sleeps until it is due)."""
    try:
        return queue.head(conn)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the Coop outbox: {exc}") from exc


Clock = queue.Clock


def due_head(conn: sqlite3.Connection, clock: Clock) -> OutboxRow | None:
    """The head pending row if it is due (`engine.store.queue.due_head`, the one predicate)."""
    try:
        return queue.due_head(conn, clock)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the Coop outbox: {exc}") from exc


def _holder(found: rows.LockRow | None) -> Holder | None:
    if found is None:
        return None
    return Holder(owner=found.owner, pid=found.pid, host=found.host, started_at=found.started_at)


def _require_owner(conn: sqlite3.Connection, owner: str, doing: str) -> None:
    found = queue.holder(conn)
    if found is None or found.owner != owner:
        held = "nobody" if found is None else found.owner
        raise LockLost(
            f"worker {owner} no longer holds the worker lock (held by {held}) while {doing};"
            " it stops and leaves the queue to the holder"
        )


@dataclass(frozen=True)
class RecordedBatch:
    """The result of recording one batch: per row whether it was still pending, and the next
    due run."""

    applied: list[bool]
    next_due: list[OutboxRow]


def due_run(conn: sqlite3.Connection, clock: Clock, limit: int) -> list[OutboxRow]:
    """The contiguous due head run, at most `limit` rows (`engine.store.queue.due_run`)."""
    try:
        return queue.due_run(conn, clock, limit)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the Coop outbox: {exc}") from exc


def record_batch(
    conn: sqlite3.Connection,
    owner: str,
    outcomes: list[tuple[OutboxRow, Outcome]],
    now_epoch: float,
    now_iso: str,
    limit: int,
) -> RecordedBatch:
    """Mark every row of one batch delivered or deferred and read the next due run, in ONE
    transaction: a failure part-way leaves no row of the batch recorded (the batch is posted
    again and the door deduplicates it). Refuses (`LockLost`) when the caller no longer holds
    the lock."""
    deliveries = [
        rows.Delivery(row.id, outcome.answer)
        if isinstance(outcome, Delivered)
        else rows.Delivery(row.id, outcome.answer, now_epoch + outcome.retry_in_s, outcome.error)
        for row, outcome in outcomes
    ]
    first = outcomes[0][0].id if outcomes else 0
    with write(conn):
        _require_owner(conn, owner, f"recording a batch from outbox row #{first}")
        applied = queue.record_batch(conn, deliveries, now_iso)
        return RecordedBatch(
            applied=applied, next_due=queue.due_run(conn, lambda: now_epoch, limit)
        )


def claim_lock_and_due_run(
    conn: sqlite3.Connection, me: Holder, now_iso: str, clock: Clock, limit: int
) -> tuple[Claim, list[OutboxRow]]:
    """`claim_lock`, then (when won) the due head run read after the claim committed."""
    claim = claim_lock(conn, me, now_iso)
    if not claim.acquired:
        return claim, []
    return claim, due_run(conn, clock, limit)


# -- the worker lock -----------------------------------------------------------------------


def claim_lock(conn: sqlite3.Connection, me: Holder, now_iso: str) -> Claim:
    """Check-and-claim in one transaction; take over only a provably gone holder."""
    with write(conn):
        # A store failing under a running drain (disk full, I/O error), for the daemon's tests.
        fault("notifier.delivery.claim")
        holder = _holder(queue.holder(conn))
        if holder is not None:
            if holder.owner == me.owner:
                return Claim(acquired=True)
            reason = why_gone(holder, me)
            if reason is None:
                return Claim(acquired=False, holder=holder)
            queue.release(conn, holder.owner)
        queue.claim(conn, me.owner, me.pid, me.host, me.started_at, now_iso)
        if holder is None:
            return Claim(acquired=True)
        return Claim(acquired=True, taken_over_from=holder, reason=reason)


def release_worker_if_idle(conn: sqlite3.Connection, owner: str, clock: Clock) -> IdleHandoff:
    """The atomic idle handoff: verify ownership, recheck the queue, keep or delete the lock.

    Producers insert under `BEGIN IMMEDIATE` too, so either their row committed first (seen
    here: `WORK_AVAILABLE`, the caller drains on) or this release committed first (their kick's
    worker finds the lock free). No committed state has queued work and no worker to run it.
    The whole predicate, the clock included, is evaluated here, under the write lock.
    """
    with write(conn):
        _require_owner(conn, owner, "handing off")
        if queue.release_if_idle(conn, owner, clock):
            return IdleHandoff.RELEASED
        return IdleHandoff.WORK_AVAILABLE


def release_lock(conn: sqlite3.Connection, owner: str) -> bool:
    """Delete the lock if `owner` holds it (a bounded drain's end, a stop); True if deleted."""
    with write(conn):
        return queue.release(conn, owner)


def lock_holder(conn: sqlite3.Connection) -> Holder | None:
    """Who holds the worker lock now (for logs and tests)."""
    try:
        return _holder(queue.holder(conn))
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the worker lock: {exc}") from exc
