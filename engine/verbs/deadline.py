"""The ledger's own decision when a request's deadline passes: the two use cases the notifier
daemon runs (`notifier.deadlines`), each on a transaction handed in.

    due_deadlines    the open (or taken) requests whose deadline has come, and the earliest
                     deadline still ahead: what the daemon applies now, and how long it sleeps
    apply_deadline   one request's deadline: when it is still open or taken and its deadline
                     has come, closed with its default (or abandoned without one) by the actor
                     `deadline`, in ONE transaction with its event (`via: deadline`, `late_s`:
                     how many seconds after the deadline it was applied) and its outbox row
                     (`settles` saying `by: deadline`, the outcome and the choice, for an ask;
                     its text saying the deadline decided); otherwise nothing at all

The transaction is the daemon's `BEGIN IMMEDIATE`, so a deadline and an answer from the phone
(`engine.verbs.phone`) on the same request serialise: whichever commits first closes it, and
the other finds it closed (the answer is told `already_closed` with what the deadline decided;
the deadline changes nothing). Neither is in `engine.verbs.VERBS`: no `coop` command, no
public function, no way through `/compat/call`, so no caller can act as the deadline.
"""

from __future__ import annotations

from typing import Any

from engine import lifecycle, store
from engine.store import ledger as ledger_store
from engine.store import queue
from engine.verbs.ledger import plain, require_applied
from engine.verbs.unit import Row, Unit

OPEN_STATUSES = ("open", "taken")


def due_deadlines(unit: Unit, now_s: float) -> tuple[list[int], float | None]:
    """The ids of the open or taken requests whose deadline is at or before `now_s` (earliest
    first), and the earliest deadline after it (None: no other open request has one)."""
    return ledger_store.open_deadlines(unit.tx(), now_s)


def apply_deadline(unit: Unit, request_id: int, now_s: float) -> Row:
    """Decide request `request_id` by its deadline, if it is still open (or taken) and its
    deadline is at or before `now_s`: `{"applied": True, "request", "outbox_id", "late_s"}`.
    Otherwise nothing changes: `{"applied": False, "request"}` (the row now, or None)."""
    conn = unit.tx()
    row = ledger_store.load(conn, "request", request_id)
    deadline_at = None if row is None else row["deadline_at"]
    if row is None or row["status"] not in OPEN_STATUSES or deadline_at is None:
        return {"applied": False, "request": None if row is None else plain(row)}
    if deadline_at > now_s:
        return {"applied": False, "request": plain(row)}
    late_s = round(max(0.0, now_s - deadline_at), 3)
    said: dict[str, Any] = {
        "via": lifecycle.VIA_DEADLINE,
        "late_s": late_s,
        "deadline_at": deadline_at,
    }
    if row["status"] == "taken":
        said["forced_from"] = row["taken_by"]
    choice = row["default_choice"]
    actor, at = lifecycle.DEADLINE_ACTOR, store.now_iso()
    if choice is not None:
        said["choice"] = choice
        applied = ledger_store.finish(conn, "request", row, "closed", actor, at, choice, None)
        event, kind, outcome = "close", "request_closed", "closed"
    else:
        said["reason"] = lifecycle.deadline_reason(deadline_at)
        applied = ledger_store.abandon(conn, "request", row, actor, at, said["reason"])
        event, kind, outcome = "abandon", "request_abandoned", "abandoned"
    require_applied(applied, "request", request_id, event)  # nothing moves it: BEGIN IMMEDIATE
    ledger_store.record_event(conn, "request", request_id, event, actor, said, at=at)
    extra = None
    if row["ask_key"] is not None:
        extra = lifecycle.settles_extra(request_id, row["ask_key"], deadline=(outcome, choice))
    outbox_id = queue.enqueue(
        conn,
        kind,
        lifecycle.deadline_text(request_id, row["title"], deadline_at, choice),
        source=f"request:{request_id}",
        extra=extra,
    )
    now_row = ledger_store.load(conn, "request", request_id)
    assert now_row is not None
    return {"applied": True, "request": plain(now_row), "outbox_id": outbox_id, "late_s": late_s}
