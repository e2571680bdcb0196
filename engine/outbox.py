"""The engine side of the transactional outbox: rows written beside the change they report,
the operator's two acts on a row (cancel with a reason, retry now), and the owner's one act on
the notifier's worker lock (`unlock_worker`, for a holder nothing else can ever clear).

`enqueue` (`engine.store.queue.enqueue`, named here too for library callers) runs inside the
caller's `store.write()` transaction, so a notification exists exactly when the change it
reports does. Delivery state (attempts, deferral, delivered) is the notifier's to write, through
`notifier.store`; every statement on the two tables is in `engine.store.queue`.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from engine import kick, lifecycle, store
from engine.config import EngineConfig
from engine.errors import LifecycleError, NotFound, UsageError
from engine.owner import routed
from engine.store import queue
from engine.store.ledger import record_event
from engine.store.queue import STATES, enqueue

__all__ = ["STATES", "cancel", "enqueue", "notify", "retry", "rows", "unlock_worker"]


@routed
@kick.after_commit
def notify(text: str, *, actor: str, kind: str = "note", db: str | None = None) -> dict[str, Any]:
    """`coop notify TEXT`: an explicit notification, recorded as an event."""
    actor = lifecycle.require_actor(actor)
    if not text or not text.strip():
        raise UsageError("the notification text is empty: say what the owner should hear")
    with store.connection(db) as conn, store.write(conn):
        outbox_id = enqueue(conn, kind, text, source=None)
        record_event(conn, "outbox", outbox_id, "notify", actor, {"kind": kind})
    return {"outbox_id": outbox_id}


def _pending_row(conn: sqlite3.Connection, outbox_id: int, verb: str) -> sqlite3.Row:
    row = queue.row(conn, outbox_id)
    if row is None:
        raise NotFound(f"outbox row #{outbox_id} does not exist — `coop status` lists the rows")
    if row["state"] != "pending":
        raise LifecycleError(
            f"outbox row #{outbox_id} is {row['state']!r} — only a pending row can be {verb}"
        )
    return row


@routed
@kick.after_commit
def cancel(outbox_id: int, *, actor: str, reason: str, db: str | None = None) -> dict[str, Any]:
    """An operator gives up on a row: it is never delivered, and the event says who and why."""
    actor = lifecycle.require_actor(actor)
    reason = lifecycle.require_reason(reason, "cancel")
    with store.connection(db) as conn, store.write(conn):
        row = _pending_row(conn, outbox_id, "cancelled")
        at = store.now_iso()
        queue.cancel(conn, outbox_id, actor, reason, at)
        record_event(
            conn,
            "outbox",
            outbox_id,
            "cancel",
            actor,
            {"reason": reason, "attempts": row["attempts"], "last_error": row["last_error"]},
            at=at,
        )
    return {"outbox_id": outbox_id, "state": "cancelled"}


@routed
@kick.after_commit
def retry(outbox_id: int, *, actor: str, db: str | None = None) -> dict[str, Any]:
    """Make a deferred row due now (the next drain tries it first, in FIFO order)."""
    actor = lifecycle.require_actor(actor)
    with store.connection(db) as conn, store.write(conn):
        row = _pending_row(conn, outbox_id, "retried")
        queue.make_due(conn, outbox_id, store.now_epoch())
        record_event(conn, "outbox", outbox_id, "retry", actor, {"attempts": row["attempts"]})
    return {"outbox_id": outbox_id, "state": "pending"}


@routed
@kick.after_commit
def unlock_worker(*, actor: str, reason: str, db: str | None = None) -> dict[str, Any]:
    """The owner clears the notifier's worker lock, whoever holds it, recorded as an event.

    The notifier takes a lock over only from a holder provably gone (same host, process dead);
    one held from another host, or by a process an operator knows is wedged, stays forever
    without this. A live holder that loses its lock stops at its next write (`LockLost`) and
    leaves the queue to the next worker. The answer's `outbox_id` is the head pending row this
    frees for delivery, so the kick after the commit wakes a drainer for it.
    """
    actor = lifecycle.require_actor(actor)
    reason = lifecycle.require_reason(reason, "unlocking the worker lock")
    owner_actor = EngineConfig.from_env().owner
    if actor != owner_actor:
        raise LifecycleError(
            f"only the owner ({owner_actor}) may clear the worker lock, not {actor}"
            " — ask them, with the reason"
        )
    with store.connection(db) as conn, store.write(conn):
        found = queue.holder(conn)
        if found is None:
            return {"unlocked": None, "outbox_id": None}
        holder = found._asdict()
        # The worker_lock row is the notifier's; this is its one writer outside the notifier,
        # the owner's explicit decision, and it deletes exactly the holder it read.
        queue.release(conn, found.owner)
        record_event(conn, "worker_lock", 1, "unlock", actor, {"reason": reason, "holder": holder})
        head = queue.head(conn)
    return {"unlocked": holder, "outbox_id": head.id if head is not None else None}


@routed
def rows(
    state: str | None = None, *, limit: int = 50, db: str | None = None
) -> list[dict[str, Any]]:
    """Outbox rows, newest first, optionally of one state."""
    if state is not None and state not in STATES:
        raise UsageError(f"outbox state {state!r} is not one of {', '.join(STATES)}")
    with store.connection(db) as conn:
        return queue.rows(conn, state, limit)
