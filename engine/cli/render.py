"""What `coop` prints: one function per kind of line, no I/O (the commands emit them)."""

from __future__ import annotations

from engine import lifecycle
from engine.store import now_epoch

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from typing import Any

    from engine.verbs.declare import Says


def describe(kind: str, result: dict[str, Any], what: str) -> str:
    """A ledger verb's answer: `todo #3 done; notification #7 queued`."""
    row = result[kind]
    line = f"{kind} #{row['id']} {what}"
    if result.get("changed") is False:
        line = f"{kind} #{row['id']} unchanged (the first close is the record)"
    if result.get("outbox_id"):
        line += f"; notification #{result['outbox_id']} queued"
    return line


def answer(kind: str, found: Any, says: Says | None, arguments: dict[str, Any]) -> list[str]:
    """What a verb's command prints of its answer (`found`), given what the verb `says`
    (`engine.verbs.declare`) and the call's arguments by parameter name: a row's line ending in
    what was done to it (`todo #3 taken by builder`), one line per entry of a listing (`says`
    when it is empty), or, for a verb that says nothing, every field of its answer."""
    if isinstance(found, list):
        lines = [line(each) for each in found]
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
    """An answer a verb says nothing about: each row's line and its other fields, then each
    listing's lines."""
    lines: list[str] = []
    for name, value in found.items():
        if isinstance(value, dict):
            lines.append(format_item({"kind": name, **value}))
            shown = _HEADLINE | (
                {"taken_by", "taken_at"} if value.get("status") == "taken" else set()
            )
            lines.extend(
                f"  {field}: {' / '.join(each) if isinstance(each, list) else each}"
                for field, each in value.items()
                if each is not None and field not in shown
            )
        elif isinstance(value, list):
            lines.extend(line(each) for each in value)
        elif value is not None:
            lines.append(f"{name}: {value}")
    return lines


#: The fields `format_item` already shows (and the taker's, while the row is taken).
_HEADLINE = frozenset({"id", "kind", "title", "status", "addressed_to"})


def line(entry: dict[str, Any]) -> str:
    """One entry of a listing: an event, an outbox row, or a todo or request."""
    if "event" in entry:
        return event_line(entry)
    if "attempts" in entry:
        return outbox_line(entry)
    return format_item(entry)


def format_item(item: dict[str, Any]) -> str:
    """One listing line: `todo #12  [taken by X, 5h ago]  title`."""
    if item["status"] == "taken":
        state = f"[taken by {item['taken_by']}, {lifecycle.ago(item['taken_at'])}]"
    else:
        state = f"[{item['status']}]"
    line = f"{item['kind']} #{item['id']}  {state}  {item['title']}"
    if item.get("addressed_to"):
        line += f"  (for {item['addressed_to']})"
    if item.get("stale"):
        line += "  ← stale take: ask its holder, or the owner releases it with a reason"
    return line


def event_line(event: dict[str, Any]) -> str:
    payload = f"  {event['payload']}" if event["payload"] else ""
    return f"{event['at']}  {event['event']:<9} {event['actor']}{payload}"


def outbox_line(row: dict[str, Any]) -> str:
    error = f"  last error: {row['last_error']}" if row["last_error"] else ""
    return (
        f"#{row['id']}  {row['state']:<9} attempts={row['attempts']}"
        f"  {row['kind']}: {row['text'][:60]!r}{error}"
    )


def cutover_lines(config: dict[str, Any]) -> list[str]:
    return [
        f"backed up {config['database']} to {config['backup']}",
        f"wrote the owner credential {config['credential_file']} (0600)",
        f"installed the fence ({config['fence_triggers']} triggers)",
        f"wrote the owner file {config['owner_file']}: every call now goes to {config['url']}",
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
    """`coop status`, the human view."""
    lines = [f"database: {status['database']}"]
    for kind, counts in status["ledger"].items():
        figures = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none"
        lines.append(f"{kind}s: {figures}")
    for take in status["stale_takes"]:
        lines.append(
            f"  stale: {take['kind']} #{take['id']} [taken by {take['taken_by']},"
            f" {lifecycle.ago(take['taken_at'])}] {take['title']}"
        )
    box = status["outbox"]
    oldest = status["oldest_pending"]
    lines.append(
        f"outbox: {box['pending']} pending, {box['delivered']} delivered,"
        f" {box['cancelled']} cancelled"
        + (f"; oldest pending #{oldest['id']}, {oldest['age_s']:.0f}s old" if oldest else "")
    )
    for row in status["failing"]:
        wait = max(0.0, row["next_attempt_at"] - now_epoch())
        lines.append(
            f"  failing: #{row['id']} attempts={row['attempts']} next in {wait:.0f}s"
            f" — {row['last_error']}"
        )
    lock = status["worker_lock"]
    lines.append(
        f"worker lock: held by {lock['owner']} (pid {lock['pid']} on {lock['host']},"
        f" since {lock['acquired_at']})"
        if lock
        else "worker lock: free"
    )
    receipts = status["uncertain_receipts"]
    lines.append(f"uncertain receipts: {len(receipts)}")
    for receipt in receipts:
        lines.append(f"  {receipt['key']} {receipt['method']} — coop reconcile {receipt['key']}")
    door = status["door"]
    if door.get("answered"):
        lines.append(
            "door: answering; "
            + ", ".join(
                f"{name}={door[name]}"
                for name in ("undelivered_reports", "sent_count", "posture", "telegram_configured")
                if name in door
            )
        )
        lines.extend(telegram_lines(door))
    else:
        lines.append(f"door: did not answer at {door['url']} ({door['error']})")
        lines.append("telegram queue: unknown (the door did not answer)")
    return lines


def telegram_lines(door: dict[str, Any]) -> list[str]:
    """The door's Telegram queue and Telegram's permanent refusal, when there is one."""
    lines = []
    if door.get("telegram_configured") is False and door.get("telegram_next_step"):
        lines.append(f"telegram: {door['telegram_next_step']} (nothing rings until then)")
    elif door.get("telegram_configured") is False:
        lines.append("telegram: not configured (Chief only: nothing rings, no outage)")
    queue = door.get("telegram_queue")
    if isinstance(queue, dict):
        lines.append(
            "telegram queue: "
            + ", ".join(
                f"{name}={queue.get(name)}"
                for name in ("depth", "oldest_age_s", "last_error", "next_attempt_in_s")
            )
        )
        refusal = queue.get("refusal")
        if isinstance(refusal, dict):
            lines.append(
                f"telegram refused: {refusal.get('answer')} ({refusal.get('kind')})"
                f" — {refusal.get('action')}"
            )
    return lines
