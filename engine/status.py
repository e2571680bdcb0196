"""`coop status`: what an operator needs to know at a glance, and `--check` for monitoring.

Four sources, each read where it lives:
- the ledger's database (`status_snapshot`, a public function of `engine.outbox`: in service
  mode the owner answers it):
  ledger counts by state and stale takes, the outbox by state, the oldest pending row's age,
  the failing rows with their last error and next attempt, the worker lock holder;
- this machine's receipts folder: uncertain receipts waiting for `coop reconcile`;
- the notify door's status endpoint, when it answers: undelivered Chief reports, sent count,
  posture, whether Telegram is configured, and its Telegram queue (depth, oldest age, last
  error, Telegram's permanent refusal). The outbox counts a row delivered once the door queued
  it, so a Telegram outage shows only there;
- in service mode, the owner service's `/status`: whether its notifier daemon delivers, and
  the pid of the daemon that holds the ledger instead (`owner_service`).

`--check` exits 0 when nothing needs a person, 1 when something does (a pending row older than
`--max-pending-age`; in service mode, the owner service's daemon not delivering, with the row
it strands and the daemon that holds the ledger instead, whatever the row's age; an uncertain
receipt, a door that does not answer, a posture that is not normal, and with Telegram
configured: Telegram refusing for good, or the door's Telegram queue holding an entry older
than the same `--max-pending-age`; an urgent report the door says went unacknowledged; the
fallback channel failing to send), 2 on
a usage error. A door that does
not answer is itself the problem named; its Telegram queue is then unknown. A door that answers
401 refused this machine's service key (the key file rotated since the services started): that
is named as a refused key, with what to do, not as a door that did not answer. The human view
ends with one verdict line (`verdict: healthy`, or how many problems its `needs a person:` lines
name). The door is asked
by `engine.door`; the lines an operator reads are `engine.cli.render.status_lines`.
"""

from __future__ import annotations

import os
from typing import Any

from engine.door import door_status
from engine.errors import UsageError
from engine.outbox import status_snapshot
from plumbing import settings

DEFAULT_MAX_PENDING_AGE_S = 600.0
OWNER_TIMEOUT_S = 2.0

__all__ = [
    "collect",
    "delivery_problems",
    "door_status",
    "fallback_problems",
    "max_pending_age",
    "owner_service",
    "problems",
    "status_snapshot",
    "telegram_problems",
    "urgent_problems",
]


def max_pending_age(given_s: str | float | None, environ: dict[str, str] | None = None) -> float:
    """`--max-pending-age` (its text as typed, or a number), else
    `COOP_STATUS_MAX_PENDING_AGE_S`, else 600 s: a positive, finite number of seconds. nan would
    compare false with every age and switch the check off. A refusal echoes the value as typed."""
    env = os.environ if environ is None else environ
    if given_s is not None:
        name, raw = "--max-pending-age", str(given_s)
    else:
        name = "COOP_STATUS_MAX_PENDING_AGE_S"
        raw = env.get(name, str(DEFAULT_MAX_PENDING_AGE_S))
    read = settings.decimal(raw)  # ASCII digits only, never `inf`, `nan` or `٦٠٠`
    value = float("nan") if read is None else read
    if not 0 < value < float("inf"):  # false for nan as well
        raise UsageError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def uncertain_receipts() -> list[dict[str, Any]]:
    from engine.owner import receipts

    return receipts.uncertain()


def owner_service(db: str | None = None) -> dict[str, Any] | None:
    """In service mode, the owner service's `/status` (whether its daemon delivers, and which
    daemon holds the ledger instead), `{"answered": False, ...}` when it does not answer; None
    in local mode. Asked without a credential, on its socket once that is proved this user's
    and private (`engine.service_socket`)."""
    import http.client
    import json

    from engine import service_socket
    from engine.errors import CoopError
    from engine.owner.compat import owner_socket
    from engine.owner_file import owner_config

    config = owner_config(db)
    if config is None:
        return None
    path = owner_socket(config)
    try:
        status, raw = service_socket.call(path, "GET", "/status", timeout_s=OWNER_TIMEOUT_S)
        answer = json.loads(raw) if status == 200 else f"HTTP {status}"
    except (CoopError, OSError, ValueError, http.client.HTTPException) as exc:
        return {"answered": False, "socket": path, "error": str(exc)}
    if not isinstance(answer, dict):
        return {"answered": False, "socket": path, "error": "its answer is not a JSON object"}
    return {"answered": True, "socket": path, **answer}


def collect(db: str | None = None) -> dict[str, Any]:
    return {
        **status_snapshot(db=db),
        "uncertain_receipts": uncertain_receipts(),
        "door": door_status(),
        "owner_service": owner_service(db),
    }


def problems(status: dict[str, Any], max_pending_age_s: float) -> list[str]:
    """What needs a person, one line each; empty when healthy."""
    found = delivery_problems(status)
    oldest = status["oldest_pending"]
    if oldest and oldest["age_s"] > max_pending_age_s and not found:
        found.append(
            f"outbox row #{oldest['id']} has waited {oldest['age_s']:.0f}s"
            f" (more than {max_pending_age_s:.0f}s)"
        )
    for receipt in status["uncertain_receipts"]:
        found.append(f"uncertain receipt {receipt['key']} ({receipt['method']}): coop reconcile")
    door = status["door"]
    if door.get("http_status") == 401:
        found.append(
            f"the door at {door['url']} refused the service key (HTTP 401): the key this"
            " machine sends is not the door's; restart the services after rotating the key"
        )
        return found
    if door.get("http_status"):
        found.append(f"the door refused at {door['url']}: {door['error']}")
        return found
    if not door.get("answered"):
        # Telegram's queue is the door's: unknown here, and the door itself is the problem.
        found.append(f"the door did not answer at {door['url']}: {door['error']}")
        return found
    if door.get("posture") not in (None, "normal"):
        found.append(f"the door's posture is {door['posture']}")
    found.extend(telegram_problems(door, max_pending_age_s))
    found.extend(urgent_problems(door))
    found.extend(fallback_problems(door))
    return found


def delivery_problems(status: dict[str, Any]) -> list[str]:
    """In service mode, the owner service's daemon not delivering: the rows pending wait for a
    daemon that holds the ledger but whose every write the cutover's fence refuses, or for one
    that failed. Whatever their age: nothing will deliver them until a person acts."""
    service = status.get("owner_service")
    if not isinstance(service, dict) or service.get("answered") is not True:
        return []  # local mode, or an owner that does not answer (the snapshot failed then)
    if service.get("daemon") is True:
        return []
    oldest = status.get("oldest_pending")
    waits = f"outbox row #{oldest['id']} is pending: " if oldest else ""
    holder = service.get("daemon_lock_holder")
    if isinstance(holder, bool) or not isinstance(holder, int) or holder <= 0:
        # Only a pid is named (the answer is printed); else the service's log says who.
        return [
            f"{waits}coop serve's notifier daemon does not deliver (its log says why:"
            " service.delivery_left_to_daemon or service.daemon_failed); see there, or"
            " restart coop serve"
        ]
    return [
        f"{waits}a notifier daemon (pid {holder}) holds the ledger's daemon lock, but the"
        " cutover's fence refuses its writes, so coop serve cannot deliver; stop it"
        f" (`kill {holder}`), and coop serve takes delivery over within seconds"
    ]


def telegram_problems(door: dict[str, Any], max_pending_age_s: float) -> list[str]:
    """A Telegram outage as the door reports it: a permanent refusal (a bad token, an unknown
    chat, a blocked bot), or a queue whose oldest entry is older than the pending-age limit.
    Nothing when Telegram is not configured (a Chief-only install) or the door does not say."""
    queue = door.get("telegram_queue")
    if door.get("telegram_configured") is not True or not isinstance(queue, dict):
        return []
    return [*_setup_problems(door), *_queue_problems(queue, max_pending_age_s)]


def _setup_problems(door: dict[str, Any]) -> list[str]:
    """What Telegram said of the setup, for a person to act on: the phone's poll refused 409
    (until Telegram accepts a poll again), a group that became a supergroup the door follows
    only until it restarts."""
    found = []
    conflict = door.get("telegram_poll_conflict")
    if isinstance(conflict, str) and conflict:
        found.append(f"the door's phone cannot read Telegram: {conflict}")
    moved = door.get("telegram_chat_moved")
    if isinstance(moved, dict) and moved.get("action"):
        found.append(
            f"Telegram made group {moved.get('from')} a supergroup ({moved.get('to')}):"
            f" {moved.get('action')}"
        )
    return found


def _queue_problems(queue: dict[str, Any], max_pending_age_s: float) -> list[str]:
    depth = queue.get("depth")
    refusal = queue.get("refusal")
    if isinstance(refusal, dict):
        return [
            f"Telegram refuses every message ({refusal.get('answer')}), {depth} queued:"
            f" {refusal.get('action')}"
        ]
    age = queue.get("oldest_age_s")
    if isinstance(age, int | float) and age > max_pending_age_s:
        return [
            f"Telegram: {depth} queued, the oldest for {age:.0f}s (more than"
            f" {max_pending_age_s:.0f}s); last error: {queue.get('last_error') or 'none'}"
        ]
    return []


def urgent_problems(door: dict[str, Any]) -> list[str]:
    """Each urgent report the door says went unacknowledged (it rang until its expiry and the
    owner never answered; the door keeps it in its status for a day, or until acknowledged
    late): a person must look. Nothing from a door that does not say (an older door)."""
    urgent = door.get("urgent")
    expired = urgent.get("expired_unacknowledged") if isinstance(urgent, dict) else None
    if not isinstance(expired, list):
        return []
    return [
        f"urgent report {report.get('key')} went unacknowledged{_through(report)}: "
        f"{report.get('text')}"
        for report in expired
        if isinstance(report, dict)
    ]


def _through(report: dict[str, Any]) -> str:
    """How far up its ladder an expired report rang (rung 2: the second person too)."""
    rung = report.get("rung")
    return f" through rung {rung} of its ladder" if isinstance(rung, int) and rung > 1 else ""


def fallback_problems(door: dict[str, Any]) -> list[str]:
    """The fallback channel (issue 35, rung 3) failing to send what Telegram could not: the
    owner hears of the outage from neither. Nothing from a door without one."""
    fallback = door.get("fallback")
    if not isinstance(fallback, dict) or not fallback.get("last_error"):
        return []
    return [
        f"the fallback channel fails ({fallback.get('waiting')} waiting): "
        f"{fallback['last_error']}; check CHIEF_FALLBACK_URLS and the door's log"
    ]
