"""The ledger's verbs: todos and requests through their lifecycles, each run on a transaction
handed in (`Unit`), holding the state change, its event row and, where the change is
reportable, its outbox row (`engine.store.queue.enqueue`, in the same transaction).

Each verb reads the row, refuses what the lifecycle forbids, then makes one guarded UPDATE
(`engine.store.ledger`) whose WHERE clause carries the condition and reports whether it
applied: the read is load-bearing (a finished row still carries its taker's name), and it is
sound because it runs inside the write transaction.
"""

from __future__ import annotations

import json
import sqlite3

from engine import lifecycle, store
from engine.errors import LifecycleError, NotFound, UsageError
from engine.store import ledger as ledger_store
from engine.store import queue
from engine.verbs.declare import command, one_of, opt, pos, reads, waits
from engine.verbs.unit import Db, Row, Unit

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true. `Unit` and `Row` are run-time names: the owner's argument check reads
# every verb's signature with `typing.get_type_hints`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _load(conn: sqlite3.Connection, kind: str, item_id: int) -> sqlite3.Row:
    row = ledger_store.load(conn, kind, item_id)
    if row is None:
        raise NotFound(f"{kind} #{item_id} does not exist — `coop list --all` shows the ids")
    return row


def require_applied(applied: bool, kind: str, item_id: int, verb: str) -> None:
    """A guarded write that found the row no longer as read: someone moved it meanwhile."""
    if not applied:
        raise LifecycleError(f"{kind} #{item_id} changed under this {verb} — re-read and retry")


def plain(row: sqlite3.Row) -> Row:
    """A row as callers read it: a request's `choices` as the list it is (NULL: None), and
    `urgent` as true or false."""
    found = dict(row)
    if found.get("choices") is not None:
        found["choices"] = json.loads(found["choices"])
    if "urgent" in found:
        found["urgent"] = bool(found["urgent"])
    return found


def _result(conn: sqlite3.Connection, kind: str, item_id: int, **extra: Any) -> Row:
    answer: Row = {kind: plain(_load(conn, kind, item_id))}
    answer.update(extra)
    return answer


def _add(
    kind: str,
    title: str,
    actor: str,
    body: str | None,
    addressed_to: str | None,
    unit: Unit,
    choices: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> Row:
    actor = lifecycle.require_actor(actor)
    title = lifecycle.require_title(title)
    at = store.now_iso()
    conn = unit.tx()
    asked = kind == "request" and addressed_to is not None and addressed_to == unit.config().owner
    # The question's own identity, drawn in this transaction: the door keys its buttons, its
    # message and every answer by it, since a request's id comes back (a fresh coop.db, a
    # restored backup, a second ledger behind the same door).
    ask_key = ledger_store.new_ask_key() if asked else None
    item_id = ledger_store.insert(
        conn, kind, title, body, addressed_to, actor, at, choices, ask_key=ask_key, options=options
    )
    payload: dict[str, Any] = {"title": title}
    if addressed_to:
        payload["addressed_to"] = addressed_to
    if choices:
        payload["choices"] = choices
    payload |= {name: value for name, value in (options or {}).items() if value}
    ledger_store.record_event(conn, kind, item_id, "add", actor, payload, at=at)
    if ask_key is not None:
        # Reported when filed, not only when closed: the owner's phone asks the question.
        outbox_id = queue.enqueue(
            conn,
            "request_added",
            lifecycle.ask_text(item_id, actor, title, choices),
            source=f"request:{item_id}",
            extra=lifecycle.ask_extra(item_id, ask_key, title, choices, options),
        )
        return _result(conn, kind, item_id, outbox_id=outbox_id)
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
    require_applied(ledger_store.take(conn, kind, item_id, actor, at, force), kind, item_id, "take")
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
    require_applied(ledger_store.release(conn, kind, row), kind, item_id, "release")
    ledger_store.record_event(conn, kind, item_id, "release", actor, payload)
    return _result(conn, kind, item_id)


def _repeat(
    conn: sqlite3.Connection,
    kind: str,
    row: sqlite3.Row,
    actor: str,
    force: bool,
    owner: str,
    given: dict[str, str | None],
) -> Row:
    """A repeat of the closing verb on a finished row. The first close is the record (who
    closed it, and when); a repeat may fill in or correct its outcome (`given`: the summary and
    the commit, None where not given), in an `edit` event naming `actor` and an outbox row that
    tells the Chief (and edits the decided ask on the phone). Once the owner decided the
    outcome, nobody else changes it: their words become a `note` beside it."""
    changes = {
        name: [row[name], value]
        for name, value in given.items()
        if value is not None and value != row[name]
    }
    actors = [
        event["actor"]
        for event in ledger_store.events(conn, kind, row["id"])
        if event["event"] in lifecycle.OUTCOME_EVENTS
    ]
    decided = lifecycle.owner_decided(owner, actors)
    may = lifecycle.repeat_close(kind, dict(row), actor, owner, force, decided)
    if not changes:
        return _result(conn, kind, row["id"], changed=False, outbox_id=None)
    if may == "note":
        return _note(conn, kind, row, actor, changes)
    ledger_store.amend(conn, kind, row["id"], given["result_summary"], given["commit_sha"])
    ledger_store.record_event(
        conn,
        kind,
        row["id"],
        "edit",
        actor,
        {
            "fields": sorted(changes),
            "previous": {name: changes[name][0] for name in sorted(changes)},
            "now": {name: changes[name][1] for name in sorted(changes)},
        },
    )
    outbox_id = queue.enqueue(
        conn,
        f"{kind}_amended",
        lifecycle.amended_text(kind, row["id"], actor, row["title"], changes),
        source=f"{kind}:{row['id']}",
        extra=_amends(kind, row),
    )
    return _result(conn, kind, row["id"], changed=True, amended=changes, outbox_id=outbox_id)


def _note(
    conn: sqlite3.Connection,
    kind: str,
    row: sqlite3.Row,
    actor: str,
    changes: dict[str, list[str | None]],
) -> Row:
    """`actor`'s words beside the owner's outcome, which stays as it is: a `note` event (the
    phone's own note has `text` too) and a Chief line saying whose words they are."""
    note = {
        "text" if name == "result_summary" else lifecycle.OUTCOME_FIELDS[name]: str(new)
        for name, (_, new) in changes.items()
    }
    ledger_store.record_event(conn, kind, row["id"], "note", actor, note)
    outbox_id = queue.enqueue(
        conn,
        f"{kind}_noted",
        lifecycle.noted_text(kind, row["id"], actor, row["title"], row["result_summary"], note),
        source=f"{kind}:{row['id']}",
    )
    return _result(
        conn, kind, row["id"], changed=False, noted=note, noted_by=actor, outbox_id=outbox_id
    )


def _amends(kind: str, row: sqlite3.Row) -> dict[str, Any] | None:
    """An amended request asked on the phone: the door edits the message that rang its ask, and
    rings nothing new (the Chief line says it). Anything else rings as its close did."""
    if kind != "request" or row["ask_key"] is None:
        return None
    return {"amends": {"request_id": row["id"], "key": row["ask_key"]}, "ring": False}


def _finish(
    kind: str,
    item_id: int,
    actor: str,
    force: bool,
    result_summary: str | None,
    commit_sha: str | None,
    unit: Unit,
    said: dict[str, Any] | None = None,
) -> Row:
    """done (todos) or close (requests), with the amend, fast-path and owner rules. `said` is
    what an answer from the phone adds to the close's event (`via`, its key, the choice or the
    text); such a close's outbox row lands in the Chief's conversation and rings nothing."""
    actor = lifecycle.require_actor(actor)
    verb = lifecycle.CLOSING_VERB[kind]
    target = lifecycle.MOVES[kind][verb][1]
    owner = unit.config().owner
    conn = unit.tx()
    row = _load(conn, kind, item_id)
    if row["status"] == target:
        given = {"result_summary": result_summary, "commit_sha": commit_sha}
        return _repeat(conn, kind, row, actor, force, owner, given)
    payload = _closing_payload(kind, item_id, verb, row, actor, force, owner) | (said or {})
    at = store.now_iso()
    applied = ledger_store.finish(conn, kind, row, target, actor, at, result_summary, commit_sha)
    require_applied(applied, kind, item_id, verb)
    ledger_store.record_event(conn, kind, item_id, verb, actor, payload or None, at=at)
    text = f"{kind} #{item_id} {lifecycle.past(verb).removeprefix('marked ')} by {actor}:"
    text += f" {row['title']}"
    if result_summary:
        text += f"\n{result_summary}"
    if commit_sha:
        text += f"\n(commit {commit_sha})"
    outbox_id = queue.enqueue(
        conn,
        f"{kind}_{target}",
        text,
        source=f"{kind}:{item_id}",
        extra=_settles(kind, row, owner, ring=said is None),
    )
    return _result(conn, kind, item_id, changed=True, outbox_id=outbox_id)


def _settles(kind: str, row: sqlite3.Row, owner: str, *, ring: bool) -> dict[str, Any] | None:
    """A request asked on the phone (it has an ask key) that closes (or is abandoned) settles
    that ask: the door finds it by the key. A request never asked has nothing to settle."""
    if kind != "request" or row["ask_key"] is None:
        return None
    return lifecycle.settles_extra(row["id"], row["ask_key"], ring=ring)


def _closing_payload(
    kind: str, item_id: int, verb: str, row: sqlite3.Row, actor: str, force: bool, owner: str
) -> dict[str, Any]:
    """Who may finish a row not yet finished, and what the event records about how."""
    status = row["status"]
    payload: dict[str, Any] = {}
    if status == "abandoned":
        if actor != owner or not force:
            raise LifecycleError(
                f"{kind} #{item_id} is abandoned — only the owner ({owner}),"
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
    require_applied(
        ledger_store.abandon(conn, kind, row, actor, at, reason), kind, item_id, "abandon"
    )
    ledger_store.record_event(conn, kind, item_id, "abandon", actor, payload, at=at)
    outbox_id = queue.enqueue(
        conn,
        f"{kind}_abandoned",
        f"{kind} #{item_id} abandoned by {actor}: {row['title']}\nreason: {reason}",
        source=f"{kind}:{item_id}",
        extra=_settles(kind, row, unit.config().owner, ring=True) if kind == "request" else None,
    )
    return _result(conn, kind, item_id, outbox_id=outbox_id)


# ---- the verbs: each function is the one source of its verb ------------------------------
# Its signature is the public function's (`engine.api`: the same parameters, the unit handed in
# by the caller that opens the transaction; `db` is read by that caller, never by the verb),
# what the owner service checks a routed call against, and, with the `@command` beside it, the
# `coop` command (`engine.verbs.declare`).

ID = pos("id")
REASON = opt("--reason", help="why (required)")
TAKE_OVER = opt("--force", help="take it over from its holder")


@command("todo add", "add an open todo", says="added", title=pos("title"), body=opt("--body"))
def add_todo(unit: Unit, title: str, *, actor: str, body: str | None = None, db: Db = None) -> Row:
    """Add an open todo."""
    return _add("todo", title, actor, body, None, unit)


@command(
    "todo take", "take a todo to work on it", says="taken by {actor}", todo_id=ID, force=TAKE_OVER
)
def take_todo(unit: Unit, todo_id: int, *, actor: str, force: bool = False, db: Db = None) -> Row:
    """Take a todo to work on it; `force` takes it over from another holder."""
    return _take("todo", todo_id, actor, force, unit)


@command("todo release", "give a taken todo back", says="released", todo_id=ID, reason=REASON)
def release_todo(unit: Unit, todo_id: int, *, actor: str, reason: str, db: Db = None) -> Row:
    """Give a taken todo back, with a reason."""
    return _release("todo", todo_id, actor, reason, unit)


@command(
    "todo done",
    "finish a todo (or amend it)",
    says="done",
    todo_id=ID,
    result_summary=opt("--summary", help="what came of it"),
    commit_sha=opt("--commit", help="the commit that did it"),
    force=opt("--force", help="finish a todo someone else holds"),
)
def done_todo(
    unit: Unit,
    todo_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
    db: Db = None,
) -> Row:
    """Finish a todo, or amend the outcome of one finished."""
    return _finish("todo", todo_id, actor, force, result_summary, commit_sha, unit)


@command(
    "todo abandon",
    "give a todo up for good",
    says="abandoned",
    todo_id=ID,
    reason=REASON,
    force=opt("--force", help="abandon a todo someone else holds"),
)
def abandon_todo(
    unit: Unit, todo_id: int, *, actor: str, reason: str, force: bool = False, db: Db = None
) -> Row:
    """Give a todo up for good, with a reason."""
    return _abandon("todo", todo_id, actor, reason, force, unit)


@reads
@command(
    "todo show",
    "a todo's fields and its last events",
    json=True,
    todo_id=ID,
    last=opt("--last", help="how many of its last events (default: 10)"),
)
def show_todo(unit: Unit, todo_id: int, *, last: int = 10, db: Db = None) -> Row:
    """One todo's fields and its `last` events, oldest of them first, with every amendment of
    its outcome and every note beside it (`amendments`, `notes`)."""
    return _show("todo", todo_id, last, unit)


@command(
    "request add",
    "add an open request",
    says="added",
    title=pos("title"),
    addressed_to=opt("--to", metavar="ADDRESSED_TO", help="the actor it is for"),
    body=opt("--body"),
    choices=opt(
        "--choices",
        metavar="A,B",
        help="1 to 4 answers the owner may tap on the phone (a request --to the owner)",
    ),
    deadline=opt(
        "--deadline",
        metavar="WHEN",
        help="when the ledger decides it if still open: in 90s, 30m, 2h, 1d, or at 18:00"
        " (today if still ahead, else tomorrow); closed with --default, else abandoned,"
        " by the actor `deadline` (the ledger itself)",
    ),
    default=opt(
        "--default", metavar="CHOICE", help="the choice the deadline closes it with (--deadline)"
    ),
    remind=opt(
        "--remind",
        metavar="EVERY",
        help="ring the ask again every EVERY (30m) while open, up to COOP_REMIND_MAX times"
        " (a request --to the owner)",
    ),
    urgent=opt("--urgent", help="ring it alone and loud until seen (a request --to the owner)"),
)
def add_request(
    unit: Unit,
    title: str,
    *,
    actor: str,
    addressed_to: str | None = None,
    body: str | None = None,
    choices: str | None = None,
    deadline: str | None = None,
    default: str | None = None,
    remind: str | None = None,
    urgent: bool = False,
    db: Db = None,
) -> Row:
    """Add an open request, for someone in particular or anyone. A request to the owner is
    reported when filed, and `choices` ("approve,decline": 1 to 4 short labels, a request to
    the owner only) are the answers the owner may tap on the phone. `deadline` ("90s", "2h",
    "1d", or a local time "18:00": today if still ahead, else tomorrow) is when the ledger
    decides it if it is still open: closed with `default` (one of `choices`), or abandoned
    without one. `remind` ("30m", a request to the owner) rings its ask again at that interval
    while it is open, at most `COOP_REMIND_MAX` times; `urgent` (the same) rings it alone and
    loud until the owner sees it."""
    if addressed_to is not None:
        addressed_to = lifecycle.require_actor(addressed_to)
    owner = unit.config().owner
    labels = None
    if choices is not None:
        labels = lifecycle.require_choices(choices, addressed_to, owner)
    raw: dict[str, Any] = {"default": default, "remind": remind, "urgent": urgent}
    if deadline is not None:
        raw["deadline_at"] = lifecycle.parse_deadline(deadline, store.now_epoch())
    options = lifecycle.request_options(raw, addressed_to, owner, labels)
    if options["remind_every_s"] is not None:
        options["remind_max"] = unit.config().remind_max  # read when filed, kept with it
    return _add("request", title, actor, body, addressed_to, unit, labels, options)


@command("request take", "take a request", says="taken by {actor}", request_id=ID, force=TAKE_OVER)
def take_request(
    unit: Unit, request_id: int, *, actor: str, force: bool = False, db: Db = None
) -> Row:
    """Take a request; `force` takes it over from another holder."""
    return _take("request", request_id, actor, force, unit)


@command(
    "request release",
    "give a taken request back",
    says="released",
    request_id=ID,
    reason=opt("--reason"),
)
def release_request(
    unit: Unit, request_id: int, *, actor: str, reason: str | None = None, db: Db = None
) -> Row:
    """Give a taken request back."""
    return _release("request", request_id, actor, reason, unit)


@command(
    "request close",
    "close a request (or amend it)",
    says="closed",
    request_id=ID,
    result_summary=opt("--summary"),
    commit_sha=opt("--commit"),
    force=opt("--force", help="close a request someone else holds"),
)
def close_request(
    unit: Unit,
    request_id: int,
    *,
    actor: str,
    result_summary: str | None = None,
    commit_sha: str | None = None,
    force: bool = False,
    db: Db = None,
) -> Row:
    """Close a request, or amend the outcome of one closed."""
    return _finish("request", request_id, actor, force, result_summary, commit_sha, unit)


@reads
@command(
    "request show",
    "a request's fields and its last events",
    json=True,
    request_id=ID,
    last=opt("--last", help="how many of its last events (default: 10)"),
)
def show_request(unit: Unit, request_id: int, *, last: int = 10, db: Db = None) -> Row:
    """One request's fields and its `last` events, oldest of them first, with every amendment
    of its outcome and every note beside it (`amendments`, `notes`)."""
    return _show("request", request_id, last, unit)


def _show(kind: str, item_id: int, last: int, unit: Unit) -> Row:
    if last < 0:
        raise UsageError(f"last {last} is not a count of events: give 0 or more")
    conn = unit.tx()
    answer = _result(conn, kind, item_id)
    events = ledger_store.events(conn, kind, item_id)
    answer |= _afterwards(events)
    answer["events"] = events[len(events) - last :] if last else []
    return answer


def _afterwards(events: list[Row]) -> Row:
    """What came after a row's close, for `show` to put beside it: each amendment of its
    outcome (`amendments`: when, by whom, each field from and to) and each note (`notes`: when,
    by whom, the words), oldest first; empty lists when there are none. `takes`: when and by
    whom it was taken apart from its close (a close straight from open takes it in the same
    write, with no take of its own: `show` then names the closer once)."""
    amendments: list[Row] = []
    notes: list[Row] = []
    takes: list[Row] = []
    for event in events:
        if event["event"] == "take":
            takes.append({"at": event["at"], "by": event["actor"]})
        if event["event"] not in ("edit", "note"):
            continue
        payload = _decoded(event["payload"])
        if event["event"] == "edit":
            changes = lifecycle.edit_changes(payload)
            amendments.append({"at": event["at"], "by": event["actor"], "changes": changes})
        else:
            words = {name: value for name, value in payload.items() if name != "via"}
            notes.append({"at": event["at"], "by": event["actor"], "note": words})
    return {"amendments": amendments, "notes": notes, "takes": takes}


def _decoded(payload: str | None) -> dict[str, Any]:
    """An event's payload as the object it should be; text of another shape (a file written by
    hand, a future build) as its words under `text`, never a failure of `show`."""
    if not payload:
        return {}
    try:
        found = json.loads(payload)
    except ValueError:
        return {"text": payload}
    return found if isinstance(found, dict) else {"text": payload}


def _nothing(answer: object, arguments: dict[str, Any]) -> str:
    return "nothing yet" if arguments["include_closed"] else "nothing open"


@reads
@command(
    "list",
    "list todos and requests",
    says=_nothing,
    json=True,
    kind=one_of(("--todos", "todo"), ("--requests", "request")),
    include_closed=opt("--all", help="include done, abandoned and closed rows"),
)
def list_items(
    unit: Unit, kind: str | None = None, *, include_closed: bool = False, db: Db = None
) -> list[Row]:
    """Todos and/or requests, open and taken ones first by id; stale takes are marked."""
    if kind not in (None, "todo", "request"):
        raise UsageError(f"kind {kind!r} is not one of todo, request")
    config = unit.config()
    now = store.now_epoch()
    found: list[Row] = []
    conn = unit.tx()
    for each in ("todo", "request") if kind is None else (kind,):
        for row in ledger_store.items(conn, each, include_closed):
            item = plain(row) | {"kind": each}
            item["stale"] = bool(
                row["status"] == "taken"
                and now - store.parse_iso(row["taken_at"]).timestamp() > config.stale_after_s
            )
            found.append(item)
    return found


@reads
@command(
    "history",
    "the event log of one row",
    json=True,
    kind=pos("kind", choices=("todo", "request")),
    item_id=ID,
)
def history(unit: Unit, kind: str, item_id: int, *, db: Db = None) -> list[Row]:
    """The event log of one todo or request, oldest first."""
    if kind not in lifecycle.TABLES:
        raise UsageError(f"kind {kind!r} is not one of todo, request")
    conn = unit.tx()
    _load(conn, kind, item_id)
    return ledger_store.events(conn, kind, item_id)


_INFINITY = float("inf")  # without `math`: the CLI's cold path reads this module


def wait_timeout(timeout_s: float | None) -> float | None:
    """A wait's timeout in seconds, checked: None (no limit), or a finite number, 0 or more
    (0 looks once). Refused in one line otherwise, before anything is bound or read."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float):
        raise UsageError(f"timeout {timeout_s!r} is not a number of seconds")
    if timeout_s != timeout_s or timeout_s in (_INFINITY, -_INFINITY):
        raise UsageError("timeout must be a finite number of seconds; leave it out to wait on")
    if timeout_s < 0:
        raise UsageError(f"timeout {timeout_s:g} is not a duration: give 0 or more seconds")
    return float(timeout_s)


def _waited(answer: Row, arguments: dict[str, Any]) -> str:
    """What `coop request wait` prints after `request #N `: who settled it, and how."""
    row = answer["request"]
    if row["closed_by"] == lifecycle.DEADLINE_ACTOR and row.get("deadline_at") is not None:
        # `abandoned by its deadline (18:00), with no answer` / `... with no answer: decline`
        line = f"{row['status']} by its deadline ({lifecycle.deadline_clock(row['deadline_at'])})"
        line += ", with no answer"
        return line + (f": {row['result_summary']}" if row["status"] == "closed" else "")
    if row["status"] == "abandoned":
        return f"abandoned by {row['closed_by']}" + (f": {row['reason']}" if row["reason"] else "")
    line = f"closed by {row['closed_by']}"
    if row["result_summary"]:
        line += f": {row['result_summary']}"
    if row["commit_sha"]:
        line += f" (commit {row['commit_sha']})"
    if answer.get("amended_by"):
        line += f" (amended by {answer['amended_by']})"
    return line


# One look of the wait: `engine.api` binds the waiter's socket first, then repeats this read
# (here, or routed to the owner service after a cutover), woken by each commit that settles
# the request (`engine.kick`), until it shows the request closed or abandoned. The look never
# blocks, and no transaction is held while the wait blocks.
@waits
@reads
@command(
    "request wait",
    "wait until a request is closed or abandoned",
    says=_waited,
    json=True,
    request_id=ID,
    timeout_s=opt(
        "--timeout", metavar="S", help="give up after S seconds: exit 3 (default: never)"
    ),
)
def wait_request(
    unit: Unit, request_id: int, *, timeout_s: float | None = None, db: Db = None
) -> Row:
    """Wait until a request is closed or abandoned, woken by the commit that settles it; answer
    its row (`{"request": {...}}`) at once if it already is. `timeout_s` (None: no limit; 0:
    look once) bounds the wait: past it, `TimedOut` (exit 3)."""
    wait_timeout(timeout_s)
    conn = unit.tx()
    answer = _result(conn, "request", request_id)
    edit = ledger_store.last_event(conn, "request", request_id, ("edit",))
    if edit is not None and edit["actor"] != answer["request"]["closed_by"]:
        answer["amended_by"] = edit["actor"]  # its outcome is not the closer's words alone
    return answer
