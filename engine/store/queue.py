"""The queue's SQL: every statement on `coop_outbox` and `worker_lock`, for every package.

Producers (`enqueue` inside the change's own transaction), the operator's acts on a row (cancel,
retry), the notifier's delivery state and worker lock (`notifier.delivery` delegates here), the
owner's `coop worker unlock` and `coop status` all read and write these two tables through this
module only. Every function runs inside the caller's open transaction (`engine.store.write`);
none opens its own.

The queue-membership predicate, the one definition the drain and the idle handoff share so
they can never disagree:

    the head pending row (lowest id) exists, and no worker has tried it yet (attempts = 0)
    or its next_attempt_at <= now

Strict FIFO follows: only the head is ever a candidate, so a deferred head holds the rows
behind it. `now` is read from the caller's clock *inside* the transaction that evaluates the
predicate (the functions take the clock, not a time): a sample taken before `BEGIN IMMEDIATE`
is stale by the time the write lock is held, and a producer committing in between would stamp
its row later than the sample, so the handoff would release the lock with a due row queued
(seed 002). A row never attempted counts as work whatever the clock says, so a worker whose
clock lags a producer's (another process, a clock step) still never strands a fresh row.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable

from engine import lifecycle
from engine.store import now_epoch, now_iso
from engine.store.schema import DELIVERY_KEY_BYTES, DELIVERY_KEY_PREFIX
from plumbing.faults import fault

# mypy reads any `TYPE_CHECKING` as true; `typing` (and the NamedTuples of engine.store.rows,
# which a producer never builds) stays off a cold `coop` verb's path: ~17% of its CPU.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from engine.store.rows import Delivery, Head, LockRow

STATES = ("pending", "delivered", "cancelled")

Clock = Callable[[], float]

_HEAD_SQL = (
    "SELECT id, kind, text, attempts, next_attempt_at, delivery_key, extra FROM coop_outbox"
    " WHERE state = 'pending' ORDER BY id LIMIT 1"
)
_RUN_SQL = (
    "SELECT id, kind, text, attempts, next_attempt_at, delivery_key, extra FROM coop_outbox"
    " WHERE state = 'pending' ORDER BY id LIMIT ?"
)
_HOLDER_SQL = (
    "SELECT owner, pid, host, started_at, acquired_at FROM worker_lock WHERE singleton = 1"
)


# -- producers and the operator --------------------------------------------------------------


def new_delivery_key() -> str:
    """A fresh delivery key (`engine.store.schema`, migration 3): random, never the id."""
    return DELIVERY_KEY_PREFIX + os.urandom(DELIVERY_KEY_BYTES).hex()


def enqueue(
    conn: sqlite3.Connection,
    kind: str,
    text: str,
    source: str | None = None,
    *,
    extra: dict[str, Any] | None = None,
) -> int:
    """Insert one pending row, due now, with its delivery key; the text is cut to the door's
    limit here, never later. `extra` holds the fields the door needs beside the text (`ask`,
    `settles`, `ring`: `engine.lifecycle.outbox_extra` builds them); the notifier sends them in
    the row's body, and a row without them sends exactly the ordinary body."""
    cur = conn.execute(
        "INSERT INTO coop_outbox"
        " (kind, text, source, state, created_at, next_attempt_at, delivery_key, extra)"
        " VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
        (
            lifecycle.require_kind(kind),
            lifecycle.cut_text(text),
            source,
            now_iso(),
            now_epoch(),
            new_delivery_key(),
            None if not extra else json.dumps(extra, sort_keys=True, separators=(",", ":")),
        ),
    )
    # A crash here must leave neither the change nor this row (see the atomicity tests). The
    # point keeps its first name: crash tests and operators' notes spell it this way.
    fault("engine.outbox.after_insert")
    return int(cur.lastrowid or 0)


def row(conn: sqlite3.Connection, outbox_id: int) -> sqlite3.Row | None:
    found: sqlite3.Row | None = conn.execute(
        "SELECT * FROM coop_outbox WHERE id = ?", (outbox_id,)
    ).fetchone()
    return found


def cancel(conn: sqlite3.Connection, outbox_id: int, actor: str, reason: str, at: str) -> bool:
    """Cancel a pending row; False when it is no longer pending."""
    cur = conn.execute(
        "UPDATE coop_outbox SET state = 'cancelled', cancelled_at = ?, cancelled_by = ?,"
        " cancel_reason = ? WHERE id = ? AND state = 'pending'",
        (at, actor, reason, outbox_id),
    )
    return cur.rowcount == 1


def make_due(conn: sqlite3.Connection, outbox_id: int, at_epoch: float) -> bool:
    """Make a pending row due at `at_epoch` (an operator's retry); False when not pending."""
    cur = conn.execute(
        "UPDATE coop_outbox SET next_attempt_at = ? WHERE id = ? AND state = 'pending'",
        (at_epoch, outbox_id),
    )
    return cur.rowcount == 1


def rows(conn: sqlite3.Connection, state: str | None, limit: int) -> list[dict[str, Any]]:
    """Rows newest first, optionally of one state."""
    if state is None:
        found = conn.execute("SELECT * FROM coop_outbox ORDER BY id DESC LIMIT ?", (limit,))
    else:
        found = conn.execute(
            "SELECT * FROM coop_outbox WHERE state = ? ORDER BY id DESC LIMIT ?", (state, limit)
        )
    return [dict(r) for r in found.fetchall()]


# -- the queue predicate and delivery state -------------------------------------------------


def _head(found: sqlite3.Row | tuple[Any, ...] | None) -> Head | None:
    if found is None:
        return None
    from engine.store.rows import Head

    return Head(
        int(found[0]),
        str(found[1]),
        str(found[2]),
        int(found[3]),
        float(found[4]),
        str(found[5]),
        None if found[6] is None else json.loads(found[6]),
    )


def head(conn: sqlite3.Connection) -> Head | None:
    """The head pending row, due or not (the daemon sleeps until it is due)."""
    return _head(conn.execute(_HEAD_SQL).fetchone())


def due_head(conn: sqlite3.Connection, clock: Clock) -> Head | None:
    """The queue predicate (see the module docstring): the head pending row if it is due.

    The clock is read after the head, inside the caller's transaction."""
    found = head(conn)
    if found is None:
        return None
    return found if found.attempts == 0 or found.next_attempt_at <= clock() else None


def due_run(conn: sqlite3.Connection, clock: Clock, limit: int) -> list[Head]:
    """Up to `limit` pending rows from the head, in id order, while each is due: the head run a
    batch may carry. The first row not due ends it (strict FIFO: a deferred row holds the rows
    behind it); an empty list when the head itself is not due. The clock is read once, after
    the rows, inside the caller's transaction."""
    found = [_head(r) for r in conn.execute(_RUN_SQL, (max(limit, 1),)).fetchall()]
    if not found:
        return []
    now = clock()
    run: list[Head] = []
    for head_row in found:
        assert head_row is not None
        if head_row.attempts != 0 and head_row.next_attempt_at > now:
            break
        run.append(head_row)
    return run


def record_batch(conn: sqlite3.Connection, outcomes: list[Delivery], at: str) -> list[bool]:
    """Record every outcome of one batch inside the caller's one transaction: each row marked
    delivered or deferred, all or none (a failure part-way rolls the whole batch back with the
    caller's transaction). One flag per outcome: False when that row was no longer pending."""
    applied: list[bool] = []
    for index, outcome in enumerate(outcomes):
        if index:
            # A store failing between two rows of one batch (the all-or-nothing tests).
            fault("engine.queue.record_batch.between_rows")
        if outcome.next_attempt_at is None:
            applied.append(record_delivered(conn, outcome.outbox_id, at, outcome.answer))
        else:
            applied.append(
                record_deferred(
                    conn,
                    outcome.outbox_id,
                    outcome.next_attempt_at,
                    at,
                    outcome.error,
                    outcome.answer,
                )
            )
    return applied


def record_delivered(conn: sqlite3.Connection, outbox_id: int, at: str, answer: str | None) -> bool:
    """Mark a pending row delivered; False when it is no longer pending (cancelled in flight)."""
    cur = conn.execute(
        "UPDATE coop_outbox SET state = 'delivered', attempts = attempts + 1,"
        " last_attempt_at = ?, delivered_at = ?, door_answer = ?"
        " WHERE id = ? AND state = 'pending'",
        (at, at, answer, outbox_id),
    )
    return cur.rowcount == 1


def record_deferred(
    conn: sqlite3.Connection,
    outbox_id: int,
    next_attempt_at: float,
    at: str,
    error: str | None,
    answer: str | None,
) -> bool:
    """Count a failed attempt and defer the row; False when it is no longer pending."""
    cur = conn.execute(
        "UPDATE coop_outbox SET attempts = attempts + 1, next_attempt_at = ?,"
        " last_attempt_at = ?, last_error = ?, door_answer = ? WHERE id = ? AND state = 'pending'",
        (next_attempt_at, at, error, answer, outbox_id),
    )
    return cur.rowcount == 1


# -- the worker lock ------------------------------------------------------------------------


def holder(conn: sqlite3.Connection) -> LockRow | None:
    """Who holds the worker lock now, or None."""
    found = conn.execute(_HOLDER_SQL).fetchone()
    if found is None:
        return None
    started = None if found[3] is None else float(found[3])
    from engine.store.rows import LockRow

    return LockRow(str(found[0]), int(found[1]), str(found[2]), started, str(found[4]))


def claim(
    conn: sqlite3.Connection,
    owner: str,
    pid: int,
    host: str,
    started_at: float | None,
    at: str,
) -> None:
    """Write the lock row for a new holder (the caller checked, in this transaction, that the
    lock is free or its holder provably gone and deleted)."""
    conn.execute(
        "INSERT INTO worker_lock (singleton, owner, pid, host, started_at, acquired_at)"
        " VALUES (1, ?, ?, ?, ?, ?)",
        (owner, pid, host, started_at, at),
    )


def release(conn: sqlite3.Connection, owner: str) -> bool:
    """Delete the lock if `owner` holds it; True if deleted."""
    cur = conn.execute("DELETE FROM worker_lock WHERE singleton = 1 AND owner = ?", (owner,))
    return cur.rowcount == 1


def release_if_idle(conn: sqlite3.Connection, owner: str, clock: Clock) -> bool:
    """The idle handoff's decision: delete `owner`'s lock unless a row is due; True if released.

    The whole predicate, the clock included, is evaluated here, inside the caller's write:
    either a producer's row committed first (seen: the lock is kept) or this release commits
    first (the producer's kick finds the lock free)."""
    if due_head(conn, clock) is not None:
        return False
    release(conn, owner)
    return True


# -- what an operator sees ------------------------------------------------------------------


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Rows by state, every state named (0 when none)."""
    found = dict(conn.execute("SELECT state, COUNT(*) FROM coop_outbox GROUP BY 1").fetchall())
    return {state: int(found.get(state, 0)) for state in STATES}


def oldest_pending(conn: sqlite3.Connection) -> sqlite3.Row | None:
    """The head pending row's id and creation time (its age is what `--check` watches)."""
    found: sqlite3.Row | None = conn.execute(
        "SELECT id, created_at FROM coop_outbox WHERE state = 'pending' ORDER BY id LIMIT 1"
    ).fetchone()
    return found


def failing(conn: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    """Pending rows that were tried and failed, oldest first, with their last error."""
    return [
        dict(r)
        for r in conn.execute(
            "SELECT id, kind, attempts, last_error, next_attempt_at, created_at"
            " FROM coop_outbox WHERE state = 'pending' AND attempts > 0 ORDER BY id LIMIT ?",
            (limit,),
        )
    ]


def oldest_pending_age_s(conn: sqlite3.Connection) -> float | None:
    """Seconds since the oldest pending row was committed, by SQLite's clock; None when none."""
    found = conn.execute(
        "SELECT (julianday('now') - julianday(MIN(created_at))) * 86400.0 FROM coop_outbox"
        " WHERE state = 'pending'"
    ).fetchone()
    return None if found[0] is None else float(found[0])


#: What `delivered_histogram` can measure over delivered rows.
ATTEMPTS = "attempts"
COMMIT_TO_DELIVERED_S = "(julianday(delivered_at) - julianday(created_at)) * 86400.0"


def delivered_histogram(
    conn: sqlite3.Connection, value: str, buckets: tuple[float, ...]
) -> tuple[Any, ...]:
    """One scan over delivered rows: the count at or below each bucket, then the count and the
    sum of `value` (`ATTEMPTS` or `COMMIT_TO_DELIVERED_S`)."""
    if value not in (ATTEMPTS, COMMIT_TO_DELIVERED_S):
        raise ValueError(f"no histogram of {value!r}")
    cumulative = ", ".join(
        f"SUM(CASE WHEN {value} <= {float(bound)!r} THEN 1 ELSE 0 END)" for bound in buckets
    )
    found: tuple[Any, ...] = tuple(
        conn.execute(
            f"SELECT {cumulative}, COUNT(*), COALESCE(SUM({value}), 0) FROM coop_outbox"
            " WHERE state = 'delivered'"
        ).fetchone()
    )
    return found


def lock_row(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The whole lock row, as `coop status` shows it."""
    found = conn.execute("SELECT * FROM worker_lock").fetchone()
    return dict(found) if found is not None else None
