"""The outbox's verbs: an explicit notification, the operator's acts on a row (cancel, retry),
the owner's clearing of the worker lock, and the operator's reads (the rows, the snapshot
`coop status` shows). Each runs on a transaction handed in (`Unit`); the SQL is
`engine.store.queue`'s and `engine.store.ledger`'s.
"""

from __future__ import annotations

import sqlite3

from engine import lifecycle, store
from engine.errors import LifecycleError, NotFound, UsageError
from engine.store import ledger as ledger_store
from engine.store import queue
from engine.verbs.declare import command, opt, pos, reads
from engine.verbs.unit import Db, Row, Unit

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true. `Unit` and `Row` are run-time names: the owner's argument check reads
# every verb's signature with `typing.get_type_hints`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: How many failing rows the snapshot lists.
FAILING_SHOWN = 20


# ---- the outbox: an explicit notification, the operator's acts on a row, the worker lock ----
# Each function is the one source of its verb; see `engine.verbs.ledger` and `declare`.

OUTBOX_ID = pos("id")


@command(
    "notify",
    "queue a line for the owner",
    says="notification #{outbox_id} queued",
    text=pos("text"),
    kind=opt("--kind", help="a short tag (default: note)"),
    urgent=opt(
        "--urgent",
        help="ring it alone and loud, through quiet hours, until the owner taps Got it",
    ),
)
def notify(
    unit: Unit,
    text: str,
    *,
    actor: str,
    kind: str = "note",
    urgent: bool = False,
    db: Db = None,
) -> Row:
    """`coop notify TEXT`: an explicit notification, recorded as an event. `urgent`: the row
    carries `urgent: true`, and the door rings it alone and loud until it is acknowledged."""
    actor = lifecycle.require_actor(actor)
    if not text or not text.strip():
        raise UsageError("the notification text is empty: say what the owner should hear")
    conn = unit.tx()
    outbox_id = queue.enqueue(
        conn, kind, text, source=None, extra={"urgent": True} if urgent else None
    )
    said: dict[str, object] = {"kind": kind} | ({"urgent": True} if urgent else {})
    ledger_store.record_event(conn, "outbox", outbox_id, "notify", actor, said)
    return {"outbox_id": outbox_id}


def _pending_row(conn: sqlite3.Connection, outbox_id: int, verb: str) -> sqlite3.Row:
    row = queue.row(conn, outbox_id)
    if row is None:
        raise NotFound(
            f"outbox row #{outbox_id} does not exist — `coop outbox list` shows the rows"
        )
    if row["state"] != "pending":
        raise LifecycleError(
            f"outbox row #{outbox_id} is {row['state']} — only a pending row can be {verb}"
        )
    return row


@reads
@command(
    "outbox list",
    "recent rows, newest first",
    json=True,
    state=opt("--state", choices=queue.STATES),
    limit=opt("--limit"),
)
def rows(unit: Unit, state: str | None = None, *, limit: int = 50, db: Db = None) -> list[Row]:
    """Outbox rows, newest first, optionally of one state."""
    if state is not None and state not in queue.STATES:
        raise UsageError(f"outbox state {state!r} is not one of {', '.join(queue.STATES)}")
    return queue.rows(unit.tx(), state, limit)


@command(
    "outbox retry",
    "make a deferred row due now",
    says="notification #{outbox_id} is due now",
    outbox_id=OUTBOX_ID,
)
def retry(unit: Unit, outbox_id: int, *, actor: str, db: Db = None) -> Row:
    """Make a deferred row due now (the next drain tries it first, in FIFO order)."""
    actor = lifecycle.require_actor(actor)
    conn = unit.tx()
    row = _pending_row(conn, outbox_id, "retried")
    queue.make_due(conn, outbox_id, store.now_epoch())
    ledger_store.record_event(
        conn, "outbox", outbox_id, "retry", actor, {"attempts": row["attempts"]}
    )
    return {"outbox_id": outbox_id, "state": "pending"}


@command(
    "outbox cancel",
    "give up on a row, with a reason",
    says="notification #{outbox_id} cancelled",
    outbox_id=OUTBOX_ID,
    reason=opt("--reason", help="why (required)"),
)
def cancel(unit: Unit, outbox_id: int, *, actor: str, reason: str, db: Db = None) -> Row:
    """An operator gives up on a row: it is never delivered, and the event says who and why."""
    actor = lifecycle.require_actor(actor)
    reason = lifecycle.require_reason(reason, "cancel")
    conn = unit.tx()
    row = _pending_row(conn, outbox_id, "cancelled")
    at = store.now_iso()
    queue.cancel(conn, outbox_id, actor, reason, at)
    ledger_store.record_event(
        conn,
        "outbox",
        outbox_id,
        "cancel",
        actor,
        {"reason": reason, "attempts": row["attempts"], "last_error": row["last_error"]},
        at=at,
    )
    return {"outbox_id": outbox_id, "state": "cancelled"}


def _unlocked(answer: Row, arguments: dict[str, Any]) -> str:
    held = answer["unlocked"]
    if held is None:
        return "the worker lock is already free; nothing to unlock"
    return (
        f"worker lock of {held['owner']} (pid {held['pid']} on {held['host']}, since"
        f" {lifecycle.clock(held['acquired_at'])}) cleared; the event log records why"
    )


@command(
    "worker unlock",
    "clear the worker lock, whoever holds it (the owner only)",
    says=_unlocked,
    description="Clear the notifier's worker lock, whoever holds it: for a holder on"
    " another host, or one known to be wedged, which no worker may take over. Only the"
    " owner ($COOP_OWNER) may; the event log records who, why and the holder cleared. A"
    " live holder stops at its next write and the next worker drains.",
    reason=opt("--reason", help="why (required; recorded in the event)"),
)
def unlock_worker(unit: Unit, *, actor: str, reason: str, db: Db = None) -> Row:
    """The owner clears the notifier's worker lock, whoever holds it, recorded as an event.

    The notifier takes a lock over only from a holder provably gone (same host, process dead);
    one held from another host, or by a process an operator knows is wedged, stays forever
    without this. A live holder that loses its lock stops at its next write (`LockLost`) and
    leaves the queue to the next worker. The answer's `outbox_id` is the head pending row this
    frees for delivery, so the kick after the commit wakes a drainer for it.
    """
    actor = lifecycle.require_actor(actor)
    reason = lifecycle.require_reason(reason, "unlocking the worker lock")
    owner_actor = unit.config().owner
    if actor != owner_actor:
        raise LifecycleError(
            f"only the owner ({owner_actor}) may clear the worker lock, not {actor}"
            " — ask them, with the reason"
        )
    conn = unit.tx()
    found = queue.holder(conn)
    if found is None:
        return {"unlocked": None, "outbox_id": None}
    holder = found._asdict()
    # The worker_lock row is the notifier's; this is its one writer outside the notifier,
    # the owner's explicit decision, and it deletes exactly the holder it read.
    queue.release(conn, found.owner)
    ledger_store.record_event(
        conn, "worker_lock", 1, "unlock", actor, {"reason": reason, "holder": holder}
    )
    head = queue.head(conn)
    return {"unlocked": holder, "outbox_id": head.id if head is not None else None}


@reads
def status_snapshot(unit: Unit, *, db: Db = None) -> Row:
    """The ledger's and the outbox's state, read in one snapshot (the caller's transaction)."""
    config = unit.config()
    now = store.now_epoch()
    conn = unit.tx()
    ledger_counts: dict[str, dict[str, int]] = {}
    stale: list[Row] = []
    for kind in lifecycle.TABLES:
        ledger_counts[kind] = ledger_store.counts(conn, kind)
        for row in ledger_store.taken(conn, kind):
            age_s = now - store.parse_iso(row["taken_at"]).timestamp()
            if age_s > config.stale_after_s:
                stale.append({"kind": kind, **dict(row), "age_s": round(age_s)})
    outbox_counts = queue.counts(conn)
    oldest = queue.oldest_pending(conn)
    failing = queue.failing(conn, FAILING_SHOWN)
    lock = queue.lock_row(conn)
    oldest_age = (
        round(now - store.parse_iso(oldest["created_at"]).timestamp(), 1) if oldest else None
    )
    return {
        "database": str(config.db_path),
        "ledger": ledger_counts,
        "stale_takes": stale,
        "outbox": outbox_counts,
        "oldest_pending": {"id": oldest["id"], "age_s": oldest_age} if oldest else None,
        "failing": failing,
        "worker_lock": lock,
    }
