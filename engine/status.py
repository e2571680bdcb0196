"""`coop status`: what an operator needs to know at a glance, and `--check` for monitoring.

Three sources, each read where it lives:
- the ledger's database (`status_snapshot`, a public function of `engine.outbox`: in service
  mode the owner answers it):
  ledger counts by state and stale takes, the outbox by state, the oldest pending row's age,
  the failing rows with their last error and next attempt, the worker lock holder;
- this machine's receipts folder: uncertain receipts waiting for `coop reconcile`;
- the notify door's status endpoint, when it answers: undelivered Chief reports, sent count,
  posture, whether Telegram is configured, and its Telegram queue (depth, oldest age, last
  error, Telegram's permanent refusal). The outbox counts a row delivered once the door queued
  it, so a Telegram outage shows only there.

`--check` exits 0 when nothing needs a person, 1 when something does (a pending row older than
`--max-pending-age`, an uncertain receipt, a door that does not answer, a posture that is not
normal, and with Telegram configured: Telegram refusing for good, or the door's Telegram queue
holding an entry older than the same `--max-pending-age`), 2 on a usage error. A door that does
not answer is itself the problem named; its Telegram queue is then unknown. The door is asked
by `engine.door`; the lines an operator reads are `engine.cli.render.status_lines`.
"""

from __future__ import annotations

import os
from typing import Any

from engine.door import door_status
from engine.errors import UsageError
from engine.outbox import status_snapshot

DEFAULT_MAX_PENDING_AGE_S = 600.0

__all__ = [
    "collect",
    "door_status",
    "max_pending_age",
    "problems",
    "status_snapshot",
    "telegram_problems",
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
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # false for nan as well
        raise UsageError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def uncertain_receipts() -> list[dict[str, Any]]:
    from engine.owner import receipts

    return receipts.uncertain()


def collect(db: str | None = None) -> dict[str, Any]:
    return {
        **status_snapshot(db=db),
        "uncertain_receipts": uncertain_receipts(),
        "door": door_status(),
    }


def problems(status: dict[str, Any], max_pending_age_s: float) -> list[str]:
    """What needs a person, one line each; empty when healthy."""
    found = []
    oldest = status["oldest_pending"]
    if oldest and oldest["age_s"] > max_pending_age_s:
        found.append(
            f"outbox row #{oldest['id']} has waited {oldest['age_s']:.0f}s"
            f" (more than {max_pending_age_s:.0f}s)"
        )
    for receipt in status["uncertain_receipts"]:
        found.append(f"uncertain receipt {receipt['key']} ({receipt['method']}): coop reconcile")
    door = status["door"]
    if not door.get("answered"):
        # Telegram's queue is the door's: unknown here, and the door itself is the problem.
        found.append(f"the door did not answer at {door['url']}: {door['error']}")
        return found
    if door.get("posture") not in (None, "normal"):
        found.append(f"the door's posture is {door['posture']!r}")
    found.extend(telegram_problems(door, max_pending_age_s))
    return found


def telegram_problems(door: dict[str, Any], max_pending_age_s: float) -> list[str]:
    """A Telegram outage as the door reports it: a permanent refusal (a bad token, an unknown
    chat, a blocked bot), or a queue whose oldest entry is older than the pending-age limit.
    Nothing when Telegram is not configured (a Chief-only install) or the door does not say."""
    queue = door.get("telegram_queue")
    if door.get("telegram_configured") is not True or not isinstance(queue, dict):
        return []
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
