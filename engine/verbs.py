"""The use cases: one function per verb, run on a transaction handed in (`Unit`), holding the
state change, its event row and, where the change is reportable, its outbox row.

A verb knows nothing of where it runs: no SQL text (that is `engine.store`), no environment
(its caller hands in the settings), no routing (`engine.api` decides local or owner service;
the owner's command log runs the same functions on its own connection). Its caller opens the
transaction and commits it when the verb returns, or rolls it back when the verb raises.

Every verb takes JSON-plain arguments and returns a JSON-plain dict, so the owner service can
run it for a remote caller and ship the answer back unchanged. Each verb reads the row, refuses
what the lifecycle forbids, then makes one guarded UPDATE (`engine.store.ledger`) whose WHERE
clause carries the condition and reports whether it applied: the read is load-bearing (a
finished row still carries its taker's name), and it is sound because it runs inside the write
transaction. The SQL lives in `engine.store.ledger` and `engine.store.queue`, none of it here.
"""

from __future__ import annotations

import sqlite3

from engine import lifecycle, store
from engine.errors import LifecycleError, NotFound, UsageError
from engine.store import ledger as ledger_store
from engine.store import queue

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true. At run time `Row` is the plain `dict` it is, which is what
# `typing.get_type_hints` finds when the owner checks a shipped call against a verb.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from engine.config import EngineConfig

    Row = dict[str, Any]
else:
    Row = dict


class Unit:
    """What a verb runs on, handed in by its caller: `Unit(tx=..., config=...)`.

    Both are asked for only when the verb needs them, after it has checked its own arguments:
    a refused call opens no database and reads no setting it does not need. (A slotted class,
    not a NamedTuple: `typing` costs a cold CLI ~7 ms.)"""

    __slots__ = ("config", "tx")

    def __init__(
        self, tx: Callable[[], sqlite3.Connection], config: Callable[[], EngineConfig]
    ) -> None:
        #: The connection of the caller's open transaction (opened on first use by `engine.api`).
        self.tx = tx
        #: The deciders' names, the stale age and the database path.
        self.config = config


def _load(conn: sqlite3.Connection, kind: str, item_id: int) -> sqlite3.Row:
    row = ledger_store.load(conn, kind, item_id)
    if row is None:
        raise NotFound(f"{kind} #{item_id} does not exist — `coop list --all` shows the ids")
    return row


def _applied(applied: bool, kind: str, item_id: int, verb: str) -> None:
    """A guarded write that found the row no longer as read: someone moved it meanwhile."""
    if not applied:
        raise LifecycleError(f"{kind} #{item_id} changed under this {verb} — re-read and retry")


def _result(conn: sqlite3.Connection, kind: str, item_id: int, **extra: Any) -> Row:
    answer: Row = {kind: dict(_load(conn, kind, item_id))}
    answer.update(extra)
    return answer


def _add(
    kind: str, title: str, actor: str, body: str | None, addressed_to: str | None, unit: Unit
) -> Row:
    actor = lifecycle.require_actor(actor)
    title = lifecycle.require_title(title)
    at = store.now_iso()
    conn = unit.tx()
    item_id = ledger_store.insert(conn, kind, title, body, addressed_to, actor, at)
    payload = {"title": title, **({"addressed_to": addressed_to} if addressed_to else {})}
    ledger_store.record_event(conn, kind, item_id, "add", actor, payload, at=at)
    return _result(conn, kind, item_id)


def _take(kind: str, item_id: int, actor: str, force: bool, unit: Unit) -> Row:
    actor = lifecycle.require_actor(actor)
    conn = unit.tx()
    row = _load(conn, kind, item_id)
    lifecycle.check_move(kind, item_id, "take", row["status"])
    foreign = row["status"] == "taken" and row["taken_by"] not in (None, actor)
    if foreign and not force:
        raise LifecycleError(
            f"{kind} #{item_id} is already taken by {row['taken_by']}"
            f" (since {lifecycle.clock(row['taken_at'])}) — --force to take it over"
        )
    at = store.now_iso()
    _applied(ledger_store.take(conn, kind, item_id, actor, at, force), kind, item_id, "take")
    outbox_id = None
    if foreign:
        previous = {"previous": row["taken_by"], "previous_at": row["taken_at"]}
        ledger_store.record_event(conn, kind, item_id, "takeover", actor, previous, at=at)
        outbox_id = queue.enqueue(
            conn,
            "takeover",
            f"{kind} #{item_id} was taken over by {actor} from {row['taken_by']}"
            f" (who held it since {lifecycle.clock(row['taken_at'])}): {row['title']}",
            source=f"{kind}:{item_id}",
        )
    else:
        ledger_store.record_event(conn, kind, item_id, "take", actor, at=at)
    return _result(conn, kind, item_id, outbox_id=outbox_id)


def _release(kind: str, item_id: int, actor: str, reason: str | None, unit: Unit) -> Row:
    actor = lifecycle.require_actor(actor)
    if kind == "todo":
        reason = lifecycle.require_reason(reason, "release")
    config = unit.config()
    conn = unit.tx()
    row = _load(conn, kind, item_id)
    lifecycle.check_move(kind, item_id, "release", row["status"])
    holder = row["taken_by"]
    payload: dict[str, Any] = {"holder": holder}
    if holder != actor:
        # No auto-reap: releasing someone else's take is a named decision with a reason.
        if actor not in (config.owner, config.chief_actor):
            raise LifecycleError(
                f"{kind} #{item_id} is taken by {holder} — only {holder}, the owner"
                f" ({config.owner}) or the chief proxy ({config.chief_actor}) may release it"
            )
        reason = lifecycle.require_reason(reason, f"releasing {holder}'s take")
        payload["decided_by"] = actor
    if reason:
        payload["reason"] = reason
    _applied(ledger_store.release(conn, kind, row), kind, item_id, "release")
    ledger_store.record_event(conn, kind, item_id, "release", actor, payload)
    return _result(conn, kind, item_id)


def _amend(
    conn: sqlite3.Connection,
    kind: str,
    row: sqlite3.Row,
    actor: str,
    result_summary: str | None,
    commit_sha: str | None,
) -> Row:
    """The first close is the record: a repeat may only fill in or correct the outcome."""
    changes = {
        name: value
        for name, value in (("result_summary", result_summary), ("commit_sha", commit_sha))
        if value is not None and value != row[name]
    }
    if not changes:
        return _result(conn, kind, row["id"], changed=False, outbox_id=None)
    ledger_store.amend(
        conn, kind, row["id"], changes.get("result_summary"), changes.get("commit_sha")
    )
    ledger_store.record_event(
        conn,
        kind,
        row["id"],
        "edit",
        actor,
        {"fields": sorted(changes), "previous": {name: row[name] for name in sorted(changes)}},
    )
    return _result(conn, kind, row["id"], changed=True, outbox_id=None)


def _finish(
    kind: str,
    item_id: int,
    actor: str,
    force: bool,
    result_summary: str | None,
    commit_sha: str | None,
    unit: Unit,
) -> Row:
    """done (todos) or close (requests), with the amend, fast-path and owner rules."""
    actor = lifecycle.require_actor(actor)
    verb = lifecycle.CLOSING_VERB[kind]
    target = lifecycle.MOVES[kind][verb][1]
    owner = unit.config().owner
    conn = unit.tx()
    row = _load(conn, kind, item_id)
    if row["status"] == target:
        if actor not in (row["closed_by"], owner) and not force:
            raise LifecycleError(
                f"{kind} #{item_id} was {lifecycle.past(verb)} by {row['closed_by']} — only"
                f" they or the owner may amend its outcome; --force to amend it anyway"
            )
        return _amend(conn, kind, row, actor, result_summary, commit_sha)
    payload = _closing_payload(kind, item_id, verb, row, actor, force, owner)
    at = store.now_iso()
    applied = ledger_store.finish(conn, kind, row, target, actor, at, result_summary, commit_sha)
    _applied(applied, kind, item_id, verb)
    ledger_store.record_event(conn, kind, item_id, verb, actor, payload or None, at=at)
    text = f"{kind} #{item_id} {lifecycle.past(verb).removeprefix('marked ')} by {actor}:"
    text += f" {row['title']}"
    if result_summary:
        text += f"\n{result_summary}"
    if commit_sha:
        text += f"\n(commit {commit_sha})"
    outbox_id = queue.enqueue(conn, f"{kind}_{target}", text, source=f"{kind}:{item_id}")
    return _result(conn, kind, item_id, changed=True, outbox_id=outbox_id)


def _closing_payload(
    kind: str, item_id: int, verb: str, row: sqlite3.Row, actor: str, force: bool, owner: str
) -> dict[str, Any]:
    """Who may finish a row not yet finished, and what the event records about how."""
    status = row["status"]
    payload: dict[str, Any] = {}
    if status == "abandoned":
        if actor != owner or not force:
            raise LifecycleError(
                f"{kind} #{item_id} is 'abandoned' — only the owner ({owner}),"
                " with --force, may record it done after all"
            )
        payload["previous_status"] = "abandoned"
        return payload
    lifecycle.check_move(kind, item_id, verb, status)
    holder = row["taken_by"]
    if status == "taken" and holder != actor:
        if not force:
            raise LifecycleError(
                f"{kind} #{item_id} is taken by {holder}"
                f" (since {lifecycle.clock(row['taken_at'])}) — only the taker may"
                f" {verb} it; --force to {verb} it anyway"
            )
        payload["forced_from"] = holder
    if status == "open":
        payload["fast_path"] = True
    return payload


def _abandon(kind: str, item_id: int, actor: str, reason: str, force: bool, unit: Unit) -> Row:
    actor = lifecycle.require_actor(actor)
    reason = lifecycle.require_reason(reason, "abandon")
    conn = unit.tx()
    row = _load(conn, kind, item_id)
    lifecycle.check_move(kind, item_id, "abandon", row["status"])
    holder = row["taken_by"]
    payload: dict[str, Any] = {"reason": reason}
    if row["status"] == "taken" and holder != actor:
        if not force:
            raise LifecycleError(
                f"{kind} #{item_id} is taken by {holder}"
                f" (since {lifecycle.clock(row['taken_at'])}) — only the taker may abandon"
                " it; --force to abandon it anyway"
            )
        payload["forced_from"] = holder
    at = store.now_iso()
    _applied(ledger_store.abandon(conn, kind, row, actor, at, reason), kind, item_id, "abandon")
    ledger_store.record_event(conn, kind, item_id, "abandon", actor, payload, at=at)
    outbox_id = queue.enqueue(
        conn,
        f"{kind}_abandoned",
        f"{kind} #{item_id} abandoned by {actor}: {row['title']}\nreason: {reason}",
        source=f"{kind}:{item_id}",
    )
    return _result(conn, kind, item_id, outbox_id=outbox_id)


# ---- the verbs, by the names the API and the owner's command log call them ----------------
# Each takes the Unit first, then exactly the arguments of its public function in `engine.api`.


def add_todo(unit: Unit, title: str, *, actor: str, body: str | None = None) -> Row:
    return _add("todo", title, actor, body, None, unit)


def take_todo(unit: Unit, todo_id: int, *, actor: str, force: bool = False) -> Row:
    return _take("todo", todo_id, actor, force, unit)


def release_todo(unit: Unit, todo_id: int, *, actor: str, reason: str) -> Row:
    return _release("todo", todo_id, actor, reason, unit)


def done_todo(
    unit: Unit,
    todo_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
) -> Row:
    return _finish("todo", todo_id, actor, force, result_summary, commit_sha, unit)


def abandon_todo(unit: Unit, todo_id: int, *, actor: str, reason: str, force: bool = False) -> Row:
    return _abandon("todo", todo_id, actor, reason, force, unit)


def add_request(
    unit: Unit,
    title: str,
    *,
    actor: str,
    addressed_to: str | None = None,
    body: str | None = None,
) -> Row:
    if addressed_to is not None:
        addressed_to = lifecycle.require_actor(addressed_to)
    return _add("request", title, actor, body, addressed_to, unit)


def take_request(unit: Unit, request_id: int, *, actor: str, force: bool = False) -> Row:
    return _take("request", request_id, actor, force, unit)


def release_request(unit: Unit, request_id: int, *, actor: str, reason: str | None = None) -> Row:
    return _release("request", request_id, actor, reason, unit)


def close_request(
    unit: Unit,
    request_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
) -> Row:
    return _finish("request", request_id, actor, force, result_summary, commit_sha, unit)


def list_items(unit: Unit, kind: str | None = None, *, include_closed: bool = False) -> list[Row]:
    """Todos and/or requests, open and taken ones first by id; stale takes are marked."""
    if kind not in (None, "todo", "request"):
        raise UsageError(f"kind {kind!r} is not one of todo, request")
    config = unit.config()
    now = store.now_epoch()
    found: list[Row] = []
    conn = unit.tx()
    for each in ("todo", "request") if kind is None else (kind,):
        for row in ledger_store.items(conn, each, include_closed):
            item = dict(row, kind=each)
            item["stale"] = bool(
                row["status"] == "taken"
                and now - store.parse_iso(row["taken_at"]).timestamp() > config.stale_after_s
            )
            found.append(item)
    return found


def history(unit: Unit, kind: str, item_id: int) -> list[Row]:
    """The event log of one todo or request, oldest first."""
    if kind not in lifecycle.TABLES:
        raise UsageError(f"kind {kind!r} is not one of todo, request")
    conn = unit.tx()
    _load(conn, kind, item_id)
    return ledger_store.events(conn, kind, item_id)


# ---- the outbox: an explicit notification, the operator's acts on a row, the worker lock ----


def notify(unit: Unit, text: str, *, actor: str, kind: str = "note") -> Row:
    """`coop notify TEXT`: an explicit notification, recorded as an event."""
    actor = lifecycle.require_actor(actor)
    if not text or not text.strip():
        raise UsageError("the notification text is empty: say what the owner should hear")
    conn = unit.tx()
    outbox_id = queue.enqueue(conn, kind, text, source=None)
    ledger_store.record_event(conn, "outbox", outbox_id, "notify", actor, {"kind": kind})
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


def cancel(unit: Unit, outbox_id: int, *, actor: str, reason: str) -> Row:
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


def retry(unit: Unit, outbox_id: int, *, actor: str) -> Row:
    """Make a deferred row due now (the next drain tries it first, in FIFO order)."""
    actor = lifecycle.require_actor(actor)
    conn = unit.tx()
    row = _pending_row(conn, outbox_id, "retried")
    queue.make_due(conn, outbox_id, store.now_epoch())
    ledger_store.record_event(
        conn, "outbox", outbox_id, "retry", actor, {"attempts": row["attempts"]}
    )
    return {"outbox_id": outbox_id, "state": "pending"}


def unlock_worker(unit: Unit, *, actor: str, reason: str) -> Row:
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


def rows(unit: Unit, state: str | None = None, *, limit: int = 50) -> list[Row]:
    """Outbox rows, newest first, optionally of one state."""
    if state is not None and state not in queue.STATES:
        raise UsageError(f"outbox state {state!r} is not one of {', '.join(queue.STATES)}")
    return queue.rows(unit.tx(), state, limit)


def status_snapshot(unit: Unit) -> Row:
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


FAILING_SHOWN = 20

#: Every verb by the name the API, the compatibility client and the owner's command log use.
VERBS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (
        add_todo,
        take_todo,
        release_todo,
        done_todo,
        abandon_todo,
        add_request,
        take_request,
        release_request,
        close_request,
        list_items,
        history,
        notify,
        cancel,
        retry,
        unlock_worker,
        rows,
        status_snapshot,
    )
}

#: The verbs that change nothing: run outside a write, their owner filings keep no answer.
READS = frozenset({"list_items", "history", "rows", "status_snapshot"})
