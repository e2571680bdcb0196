"""What `coop` prints for people: one function per kind of line, no I/O (the commands emit them).

The words are plain: a time is `2026-12-03 10:28 UTC (3 min ago)`, nothing is `—`, a listing's
columns line up, a text keeps its own characters (`£` stays `£`; only what a terminal would act
on is escaped, by `plumbing.terminal` on the way out), a text of several lines is shown as
indented lines under its label, and fields that are the machine's own (an ask key, an event's
`fast_path`) are left out: `--json` prints every field exactly.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

from engine import lifecycle, store

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from typing import Any

    from engine.verbs.declare import Says

#: What a person reads where a field holds nothing.
NOTHING = "—"
#: The most of a notification's text an outbox listing shows on its line.
TEXT_WIDTH = 60
#: Fields the human view leaves out: the machine's own (an identity, a flag), or already in
#: the row's first line.
_INTERNAL = frozenset({"ask_key", "answer_key", "fast_path", "stale", "delivery_key", "extra"})
_HEADLINE = frozenset({"id", "kind", "title", "status", "addressed_to"})
#: What `show` answers beside a row, shown under its close (`row_lines`).
_BESIDE = ("amendments", "notes", "takes")
#: A row's fields as a person reads them, in this order: (label, value field, by field).
_ROW_FIELDS = (
    ("body", "body", None),
    ("choices", "choices", None),
    ("deadline", "deadline_at", None),
    ("remind", "remind_every_s", None),
    ("urgent", "urgent", None),
    ("created", "created_at", "created_by"),
    ("taken", "taken_at", "taken_by"),
    ("closed", "closed_at", "closed_by"),
    ("summary", "result_summary", None),
    ("commit", "commit_sha", None),
    ("reason", "reason", None),
    ("updated", "updated_at", None),
)
# The values start one column past the longest label's colon (`deadline:`), as they did past
# `created:` and a space before it was added.
_LABEL_WIDTH = max(len(label) for label, _, _ in _ROW_FIELDS)


# ---- words: times, ages, values ------------------------------------------------------------


def duration(seconds: float) -> str:
    """`40 s`, `3 min`, `5 h`, `2 days`: a length of time, whole units, rounded down."""
    whole = max(0, int(seconds))
    if whole >= 86400:
        days = whole // 86400
        return f"{days} day" if days == 1 else f"{days} days"
    if whole >= 3600:
        return f"{whole // 3600} h"
    if whole >= 60:
        return f"{whole // 60} min"
    return f"{whole} s"


def _epoch(stamp: str) -> float | None:
    """A stored UTC timestamp (`2026-12-03T10:28:26.962Z`) in epoch seconds; None for any
    other text. Not `strptime`, which would import `locale` on the CLI's cold path."""
    if len(stamp) != 24 or stamp[4:20:3] != "--T::." or stamp[-1] != "Z":
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()  # no `locale`: C, unlike `strptime`
    except ValueError:
        return None


def ago(stamp: str, now_s: float | None = None) -> str:
    """`3 min ago` for a stored UTC timestamp; the text as it is when it is no such timestamp."""
    then_s = _epoch(stamp)
    if then_s is None:
        return stamp
    return duration((store.now_epoch() if now_s is None else now_s) - then_s) + " ago"


def when(stamp: str | None, now_s: float | None = None) -> str:
    """`2026-12-03 10:28 UTC (3 min ago)` for a stored UTC timestamp; `—` for none."""
    if not stamp:
        return NOTHING
    if _epoch(stamp) is None:
        return stamp
    return f"{stamp[:10]} {stamp[11:16]} UTC ({ago(stamp, now_s)})"


def word(value: Any) -> str:
    """A value as a person reads it: `yes`/`no`, `—` for nothing, a list as `a / b`, a mapping
    as `name: value` pairs."""
    if value is None or value == "":
        return NOTHING
    if value is True:
        return "yes"
    if value is False:
        return "no"
    if isinstance(value, list | tuple):
        return " / ".join(word(each) for each in value) or NOTHING
    if isinstance(value, dict):
        return ", ".join(f"{name.replace('_', ' ')}: {word(each)}" for name, each in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def columns(rows: list[list[str]]) -> list[str]:
    """Rows of cells as lines whose columns line up (two spaces between), the last unpadded."""
    widths = [
        max(len(row[i]) for row in rows if i < len(row))
        for i in range(max(map(len, rows), default=0))
    ]
    return [
        "  ".join(
            cell if i == len(row) - 1 else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def labelled(label: str, text: str, indent: str = "  ") -> list[str]:
    """`  label:   text`, a text of several lines as indented lines under its first."""
    head = f"{indent}{label + ':':<{_LABEL_WIDTH + 1}} "
    first, *rest = text.split("\n")
    return [head + first, *(" " * len(head) + each for each in rest)]


# ---- a verb's answer -----------------------------------------------------------------------


def describe(kind: str, result: dict[str, Any], what: str) -> str:
    """A ledger verb's answer: `todo #3 done; notification #7 queued`."""
    row = result[kind]
    line = f"{kind} #{row['id']} {what}"
    if result.get("amended"):
        words = lifecycle.changes_words(result["amended"])
        line = f"{kind} #{row['id']} amended: {words}; the first close stays the record"
    elif result.get("noted"):
        answer = lifecycle.quoted(row["result_summary"])
        line = (
            f"{kind} #{row['id']} noted: the owner's decision stays the record (summary {answer});"
            f" {result['noted_by']}'s {note_words(result['noted'])} is kept as a note beside it"
        )
    elif result.get("changed") is False:
        line = (
            f"{kind} #{row['id']} unchanged: already"
            f" {lifecycle.past(lifecycle.CLOSING_VERB[kind])} by {row['closed_by']},"
            " and nothing given differs from it"
        )
    if result.get("outbox_id"):
        line += f"; notification #{result['outbox_id']} queued"
    return line


def note_words(note: dict[str, Any]) -> str:
    """A note's words as given: `summary "decline"`, `commit "beef"`."""
    return "; ".join(
        f"{'summary' if name == 'text' else name} {lifecycle.quoted(value)}"
        for name, value in note.items()
    )


def answer(kind: str, found: Any, says: Says | None, arguments: dict[str, Any]) -> list[str]:
    """What a verb's command prints of its answer (`found`), given what the verb `says`
    (`engine.verbs.declare`) and the call's arguments by parameter name: a row's line ending in
    what was done to it (`todo #3 taken by builder`), a listing in aligned columns (`says`
    when it is empty), or, for a verb that says nothing, its row's fields and its events."""
    if isinstance(found, list):
        lines = listing(found)
        if not found and says is not None:
            lines.append(_said(says, {}, arguments))
        return lines
    if says is None:
        return _fields(found)
    what = _said(says, found, arguments)
    return [describe(kind, found, what)] if kind in found else [what]


def _said(says: Says, found: Any, arguments: dict[str, Any]) -> str:
    if isinstance(says, str):
        return says.format_map({**arguments, **found})
    return says(found, arguments)


def _fields(found: dict[str, Any]) -> list[str]:
    """An answer a verb says nothing about (`todo show`): each row's line and its fields, then
    each listing under its name."""
    lines: list[str] = []
    # A row's amendments and notes (`show`) are read beside its close, not as listings.
    beside = {name: found[name] for name in _BESIDE if name in found}
    for name, value in found.items():
        if name in _BESIDE:
            continue
        if isinstance(value, dict):
            lines.extend(row_lines({"kind": name, **value, **beside}))
        elif isinstance(value, list):
            lines.append(f"{name}:" if value else f"{name}: {NOTHING}")
            lines.extend("  " + each for each in listing(value))
        elif name not in _INTERNAL:
            lines.append(f"{name.replace('_', ' ')}: {word(value)}")
    return lines


def row_lines(item: dict[str, Any]) -> list[str]:
    """A todo or request shown whole: its listing line, then its fields, labelled and aligned;
    a time with its age, who beside it."""
    lines = ["  ".join(cell for cell in _item_cells(item) if cell)]
    for label, field, by in _ROW_FIELDS:
        value = item.get(field)
        if field == "reason":  # the amendments and notes follow the close's own outcome
            lines.extend(_afterwards(item))
        if (value is None and field != "body") or (field == "urgent" and not value):
            continue
        if field == "taken_at" and _fast_path(item):
            continue  # nobody took it: its closer is named once, on `closed`
        if field in _OPTION_WORDS:
            text = _OPTION_WORDS[field](item)
        elif field.endswith("_at"):
            text = when(value) + (f" by {item[by]}" if by and item.get(by) else "")
        else:
            text = word(value)
        lines.extend(labelled(label, text))
    named = {field for _, field, by in _ROW_FIELDS} | {by for _, _, by in _ROW_FIELDS if by}
    named |= {"default_choice", "remind_max", *_BESIDE}
    for field, value in item.items():
        if field in named or field in _HEADLINE or field in _INTERNAL or value is None:
            continue
        lines.extend(labelled(field.replace("_", " "), word(value)))
    return lines


def _fast_path(item: dict[str, Any]) -> bool:
    """A row closed (or done) straight from open: the close wrote its closer as its taker too,
    at the same moment. `show` says so by its `takes` (none); a row without them, by the same
    moment and actor (a take and a close in one millisecond would read as one)."""
    takes = item.get("takes")
    if isinstance(takes, list):
        return bool(item.get("closed_at")) and not takes
    return bool(item.get("closed_at")) and (item.get("taken_at"), item.get("taken_by")) == (
        item.get("closed_at"),
        item.get("closed_by"),
    )


def _afterwards(item: dict[str, Any]) -> list[str]:
    """Beside the close: each amendment of its outcome and each note, in their own words and
    with their own actors, never as the closer's (`show` answers them: `engine.verbs.ledger`)."""
    lines: list[str] = []
    for each in item.get("amendments") or []:
        text = f"{when(each['at'])} by {each['by']}: {lifecycle.changes_words(each['changes'])}"
        lines.extend(labelled("amended", text))
    for each in item.get("notes") or []:
        words = "; ".join(
            str(value) if name == "text" else f"{name} {value}"
            for name, value in each["note"].items()
        )
        lines.extend(labelled("note", f"{when(each['at'])} by {each['by']}: {words}"))
    return lines


def _deadline_words(item: dict[str, Any]) -> str:
    """`18:00 today (if no answer: decline)`, `09:00 tomorrow (if no answer: abandoned)`: the
    default named after the words, so a choice named `no` reads as one."""
    at = lifecycle.deadline_when(item["deadline_at"], store.now_epoch())
    return at + f" (if no answer: {item.get('default_choice') or 'abandoned'})"


def _remind_words(item: dict[str, Any]) -> str:
    """`every 30 min, at most 3 times`."""
    times = item.get("remind_max")
    return f"every {duration(item['remind_every_s'])}" + (
        f", at most {times} times" if times else ""
    )


#: A request's options, each in words of its own (`request show`).
_OPTION_WORDS = {
    "deadline_at": _deadline_words,
    "remind_every_s": _remind_words,
    "urgent": lambda item: "yes: rings alone and loud until seen",
}


# ---- listings ------------------------------------------------------------------------------


def listing(found: list[dict[str, Any]]) -> list[str]:
    """A listing, one line per entry, its columns aligned: events, outbox rows (under a header),
    or todos and requests."""
    if not found:
        return []
    if "event" in found[0]:
        return columns([_event_cells(each) for each in found])
    if "attempts" in found[0]:
        header = ["ID", "STATE", "TRIES", "KIND", "QUEUED", "TEXT", "LAST ERROR"]
        return columns([header, *(_outbox_cells(each) for each in found)])
    return columns([_item_cells(each) for each in found])


def _item_cells(item: dict[str, Any]) -> list[str]:
    if item["status"] == "taken":
        state = f"[taken by {item['taken_by']}, {ago(item['taken_at'])}]"
    else:
        state = f"[{item['status']}]"
    to = item.get("addressed_to")
    cells = [f"{item['kind']} #{item['id']}", state, item["title"], f"(for {to})" if to else ""]
    if item.get("stale"):
        cells.append("← stale take: ask its holder, or the owner releases it with a reason")
    return cells


def payload_words(payload: Any) -> str:
    """An event's payload (its stored JSON text) as `name: value; name: value`, without the
    machine's own flags; the text as it is when it is no JSON object."""
    if not payload:
        return ""
    try:
        found = json.loads(payload) if isinstance(payload, str) else payload
    except ValueError:
        return str(payload)
    if not isinstance(found, dict):
        return word(found)
    return "; ".join(
        _payload_item(name, value) for name, value in found.items() if name not in _INTERNAL
    )


def _payload_item(name: str, value: Any) -> str:
    """One field of a payload in words: `remind every: 30 min` for a length of time (a name in
    `_s`), `0.1 s late` for how late a deadline was applied, `deadline: 18:00 today` for a
    deadline (epoch seconds), a stored time with its age, else `name: value`."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and name == "late_s":
        return f"{span(value)} late"
    if number and name.endswith("_s"):
        return f"{name.removesuffix('_s').replace('_', ' ')}: {span(value)}"
    if number and name == "deadline_at":
        return f"deadline: {lifecycle.deadline_when(value, store.now_epoch())}"
    if isinstance(value, str) and name.endswith("_at"):
        return f"{name.replace('_', ' ')}: {when(value)}"  # a stored time, with its age
    return f"{name.replace('_', ' ')}: {word(value)}"


def span(seconds: float) -> str:
    """A stored length of time exactly, in words: `0.1 s`, `45 s`, `30 min`, `1 h 30 min`,
    `2 days` (under a minute to a tenth of a second; above it, whole seconds)."""
    if seconds < 60:
        return f"{round(seconds, 1):g} s"
    left: int = round(seconds)
    parts: list[str] = []
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {unit}" + ("s" if unit == "day" and count > 1 else ""))
    return " ".join(parts)


def _event_cells(event: dict[str, Any]) -> list[str]:
    words = payload_words(event["payload"])
    if event["event"] == "edit":
        words = edit_words(event["payload"]) or words
    return [when(event["at"]), event["event"], event["actor"], words]


def edit_words(payload: Any) -> str:
    """An `edit` event's payload as the amendment it was: `summary "a" → "b"` (`fields`,
    `previous` and `now` are the machine's record of it); "" for a payload of another shape."""
    try:
        found = json.loads(payload) if isinstance(payload, str) else payload
    except ValueError:
        return ""
    return lifecycle.changes_words(lifecycle.edit_changes(found))


def _outbox_cells(row: dict[str, Any]) -> list[str]:
    first, *more = row["text"].split("\n")
    text = first if not more else first + " …"
    if len(text) > TEXT_WIDTH:
        text = text[: TEXT_WIDTH - 1] + "…"
    return [
        f"#{row['id']}",
        row["state"],
        str(row["attempts"]),
        row["kind"],
        ago(row["created_at"]),
        text,
        row["last_error"] or NOTHING,
    ]


# ---- the operator's commands ---------------------------------------------------------------


def cutover_lines(config: dict[str, Any]) -> list[str]:
    if "migrated_from" in config:
        return [
            f"rewrote the owner file {config['owner_file']}: every call now goes to the socket"
            f" {config['socket']}, not {config['migrated_from']} (credential, backup and fence"
            " unchanged)"
        ]
    return [
        f"backed up {config['database']} to {config['backup']}",
        f"wrote the owner credential {config['credential_file']} (0600)",
        f"installed the fence ({config['fence_triggers']} triggers)",
        f"wrote the owner file {config['owner_file']}: every call now goes to {config['socket']}",
    ]


RECONCILED = {
    "committed": "committed: it ran once and its change is in the ledger",
    "rejected": "rejected: it changed nothing",
    "never_arrived": "never arrived: it changed nothing and will not run later; send it again",
}


def reconcile_lines(key: str, answer: dict[str, Any]) -> list[str]:
    what = RECONCILED.get(answer["outcome"], answer["outcome"])
    method = f" ({answer['method']})" if answer.get("method") not in (None, "?") else ""
    lines = [f"request {key}{method} {what}"]
    if answer.get("error"):
        lines.append(f"  refused with: {answer['error']['message']}")
    settled = answer.get("receipt")
    lines.append(
        f"  receipt settled {settled['state']}" if settled else "  no local receipt for it"
    )
    return lines


def status_lines(status: dict[str, Any]) -> list[str]:
    """`coop status`, the human view (the verdict is the command's: `verdict_line`)."""
    lines = [f"database: {status['database']}"]
    for kind, counts in status["ledger"].items():
        figures = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"
        lines.append(f"{kind}s: {figures}")
    for take in status["stale_takes"]:
        lines.append(
            f"  stale: {take['kind']} #{take['id']} [taken by {take['taken_by']},"
            f" {ago(take['taken_at'])}] {take['title']}"
        )
    lines.extend(_outbox_status(status))
    lock = status["worker_lock"]
    lines.append(
        f"worker lock: held by {lock['owner']} (pid {lock['pid']} on {lock['host']},"
        f" since {when(lock['acquired_at'])})"
        if lock
        else "worker lock: free"
    )
    receipts = status["uncertain_receipts"]
    lines.append(f"uncertain receipts: {len(receipts) or 'none'}")
    for receipt in receipts:
        lines.append(f"  {receipt['key']} {receipt['method']} — coop reconcile {receipt['key']}")
    lines.extend(door_lines(status["door"]))
    return lines


def _outbox_status(status: dict[str, Any]) -> list[str]:
    box = status["outbox"]
    oldest = status["oldest_pending"]
    lines = [
        f"outbox: {box['pending']} pending, {box['delivered']} delivered,"
        f" {box['cancelled']} cancelled"
        + (
            f"; the oldest pending is #{oldest['id']}, waiting {duration(oldest['age_s'])}"
            if oldest
            else ""
        )
    ]
    for row in status["failing"]:
        wait = max(0.0, row["next_attempt_at"] - store.now_epoch())
        lines.append(
            f"  failing: #{row['id']}, {row['attempts']} attempts, the next in {duration(wait)}"
            f" — {row['last_error'] or NOTHING}"
        )
    return lines


def door_lines(door: dict[str, Any]) -> list[str]:
    """The door's answer, and its Telegram queue when it answered."""
    if door.get("answered"):
        said = [
            f"{door['undelivered_reports']} Chief reports undelivered"
            if "undelivered_reports" in door
            else "",
            f"{door['sent_count']} sent" if "sent_count" in door else "",
            f"posture {door['posture']}" if "posture" in door else "",
        ]
        if "telegram_configured" in door:
            configured = door["telegram_configured"] is True
            said.append("Telegram configured" if configured else "Telegram not configured")
        words = ", ".join(each for each in said if each)
        head = f"door: answering at {door['url']}" + (f"; {words}" if words else "")
        return [head, *telegram_lines(door), *fallback_lines(door)]
    if door.get("http_status") == 401:
        return [
            f"door: refused this machine's service key at {door['url']} (HTTP 401)",
            "telegram queue: unknown (the door refused the key)",
        ]
    if door.get("http_status"):
        return [
            f"door: refused at {door['url']} ({door['error']})",
            "telegram queue: unknown (the door refused)",
        ]
    return [
        f"door: did not answer at {door['url']} ({door['error']})",
        "telegram queue: unknown (the door did not answer)",
    ]


def telegram_lines(door: dict[str, Any]) -> list[str]:
    """The door's Telegram queue and Telegram's permanent refusal, when there is one."""
    lines = []
    if door.get("telegram_configured") is False and door.get("telegram_next_step"):
        lines.append(f"telegram: {door['telegram_next_step']} (nothing rings until then)")
    elif door.get("telegram_configured") is False:
        lines.append("telegram: not configured (Chief only: nothing rings, no outage)")
    queue = door.get("telegram_queue")
    if isinstance(queue, dict):
        lines.append("telegram queue: " + queue_words(queue))
        lines.extend(urgent_lines(door))
        refusal = queue.get("refusal")
        if isinstance(refusal, dict):
            lines.append(
                f"telegram refused: {refusal.get('answer')} ({refusal.get('kind')})"
                f" — {refusal.get('action')}"
            )
    moved = door.get("telegram_chat_moved")
    if isinstance(moved, dict):
        lines.append("telegram chat moved: " + chat_moved_words(moved))
    conflict = door.get("telegram_poll_conflict")
    if isinstance(conflict, str) and conflict:
        lines.append(f"telegram polling: refused — {conflict}")
    hours = door.get("telegram_quiet_hours")
    if isinstance(hours, dict):
        lines.append("telegram quiet hours: " + quiet_hours_words(hours))
    return lines


def urgent_lines(door: dict[str, Any]) -> list[str]:
    """Each urgent report the door says still rings: its number, the rung of its ladder it
    reached, its next step and when, and how to stop it from here (`chief ack N`)."""
    urgent = door.get("urgent")
    ringing = urgent.get("ringing") if isinstance(urgent, dict) else None
    if not isinstance(ringing, list):
        return []
    lines = []
    for row in ringing:
        if not isinstance(row, dict):
            continue
        step, at = row.get("next_step"), row.get("next_step_at")
        wait = f" in {duration(max(0.0, at - time.time()))}" if isinstance(at, int | float) else ""
        then = f", next: {step}{wait}" if step else ""
        lines.append(
            f"urgent: #{row.get('number')} ringing at rung {row.get('rung', 1)} (ring"
            f" {row.get('rings')}){then} — {row.get('text')} (chief ack {row.get('number')}"
            " stops it)"
        )
    return lines


def fallback_lines(door: dict[str, Any]) -> list[str]:
    """The fallback channel (issue 35, rung 3) when one is configured: the Telegram outage it
    stands in for, and what it sent and holds."""
    fallback = door.get("fallback")
    if not isinstance(fallback, dict) or fallback.get("configured") is not True:
        return []
    since = fallback.get("telegram_failing_since")
    line = "fallback: "
    if isinstance(since, int | float):
        at = datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M")
        line += f"Telegram failing since {at} ({fallback.get('telegram_failing_why')})"
    else:
        line += "standing by (Telegram delivers)"
    line += f"; {fallback.get('sent')} sent, {fallback.get('waiting')} waiting"
    if fallback.get("last_error"):
        line += f"; last error: {fallback['last_error']}"
    return [line]


def chat_moved_words(moved: dict[str, Any]) -> str:
    """`group -5 became supergroup -1005; the door rings it now — set TELEGRAM_CHAT_ID=...`."""
    words = f"group {moved.get('from')} became supergroup {moved.get('to')}; the door rings it now"
    action = moved.get("action")
    return f"{words} — {action}" if action else f"{words} (the pairing names it)"


def quiet_hours_words(hours: dict[str, Any]) -> str:
    """`23:00-07:00 (Europe/Rome), in force now: messages arrive silently`, or `not now`."""
    named = f"{hours.get('window')} ({hours.get('zone')})"
    if hours.get("in_force") is True:
        return f"{named}, in force now: messages arrive silently"
    return f"{named}, not in force now: messages ring as usual"


def queue_words(queue: dict[str, Any]) -> str:
    """`empty`, or `3 waiting, the oldest for 12 s; last error: …; the next attempt in 4 s`."""
    depth = queue.get("depth")
    if not depth:
        return "empty"
    line = f"{depth} waiting"
    age = queue.get("oldest_age_s")
    if isinstance(age, int | float):
        line += f", the oldest for {duration(age)}"
    line += f"; last error: {queue.get('last_error') or NOTHING}"
    wait = queue.get("next_attempt_in_s")
    if isinstance(wait, int | float):
        line += f"; the next attempt in {duration(wait)}"
    return line


def verdict_line(problems: list[str]) -> str:
    """The last line of `coop status`: healthy, or how many things above need a person."""
    if not problems:
        return "verdict: healthy"
    count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
    return f"verdict: not healthy ({count} above)"
