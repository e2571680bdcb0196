"""`coop status`: what an operator needs to know at a glance, and `--check` for monitoring.

Three sources, each read where it lives:
- the ledger's database (`status_snapshot`, a public function of `engine.api`: in service
  mode the owner answers it):
  ledger counts by state and stale takes, the outbox by state, the oldest pending row's age,
  the failing rows with their last error and next attempt, the worker lock holder;
- this machine's receipts folder: uncertain receipts waiting for `coop reconcile`;
- the notify door's status endpoint, when it answers: undelivered Chief reports, sent count,
  posture and whether Telegram is configured.

`--check` exits 0 when nothing needs a person, 1 when something does (a pending row older than
`--max-pending-age`, an uncertain receipt, a door that does not answer, a posture that is not
normal), 2 on a usage error. Standard library only (urllib for the door, never through a proxy;
the service key only from a 0600 file).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from engine import keyfile, lifecycle, loopback, store
from engine.api import status_snapshot
from engine.config import data_home
from engine.errors import UsageError

# Shared with the notifier and the door, which keep their own copies (the packages share no
# code): tests/contract/test_shared_facts.py fails if any copy differs.
DEFAULT_DOOR_URL = "http://127.0.0.1:8765/api/coop/engine/notify"  # notifier.config, chief.door
SERVICE_KEY_HEADER = "X-Coop-Service-Key"  # notifier.client, chief.door.guard
SERVICE_KEY_FILE_NAME = "service.key"  # notifier.config, chief.door.config
DOOR_TIMEOUT_S = 2.0
DEFAULT_MAX_PENDING_AGE_S = 600.0

__all__ = ["collect", "door_status", "max_pending_age", "problems", "render", "status_snapshot"]


def max_pending_age(given_s: float | None, environ: dict[str, str] | None = None) -> float:
    """`--max-pending-age`, else `COOP_STATUS_MAX_PENDING_AGE_S`, else 600 s."""
    env = os.environ if environ is None else environ
    if given_s is None:
        raw = env.get("COOP_STATUS_MAX_PENDING_AGE_S", str(DEFAULT_MAX_PENDING_AGE_S))
        try:
            given_s = float(raw)
        except ValueError:
            raise UsageError(
                f"COOP_STATUS_MAX_PENDING_AGE_S must be a number of seconds, not {raw!r}"
            ) from None
    if given_s <= 0:
        raise UsageError(f"the maximum pending age must be positive, not {given_s}")
    return given_s


def uncertain_receipts() -> list[dict[str, Any]]:
    from engine.owner import receipts

    return receipts.uncertain()


def door_status(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Ask the door how it is; `{"answered": False, "error": ...}` when it does not answer.

    The service key is read through the engine's one key reader (refused unless 0600) and sent
    straight to the door, never through a proxy the environment names."""
    env = os.environ if environ is None else environ
    notify_url = env.get("COOP_DOOR_URL") or DEFAULT_DOOR_URL
    url = door_status_url(notify_url)
    key_file = Path(env.get("COOP_SERVICE_KEY_FILE") or data_home(env) / SERVICE_KEY_FILE_NAME)
    try:
        key = keyfile.read_private(key_file.expanduser(), "the service key")
    except keyfile.KeyFileError as exc:
        return {"answered": False, "url": url, "error": exc.message}
    request = urllib.request.Request(url, headers={SERVICE_KEY_HEADER: key})  # noqa: S310
    try:
        with loopback.open_url(request, DOOR_TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        # The door's refusals name their reason (posture_blocked, owner_unconfigured, ...).
        with exc:
            try:
                reason = json.loads(exc.read()).get("detail")
            except (OSError, ValueError, AttributeError):
                reason = None
        error = f"HTTP {exc.code}" + (f" {reason}" if reason else "")
        return {"answered": False, "url": url, "error": error}
    except (OSError, ValueError) as exc:
        return {"answered": False, "url": url, "error": str(getattr(exc, "reason", exc))}
    if not isinstance(answer, dict):
        return {"answered": False, "url": url, "error": "the door's answer is not a JSON object"}
    return {"answered": True, "url": url, **answer}


def door_status_url(notify_url: str) -> str:
    """The door's status endpoint beside its notify endpoint (`.../engine/notify` ->
    `.../engine/status`, the door's STATUS_PATH)."""
    return notify_url.rsplit("/", 1)[0] + "/status"


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
        found.append(f"the door did not answer at {door['url']}: {door['error']}")
    elif door.get("posture") not in (None, "normal"):
        found.append(f"the door's posture is {door['posture']!r}")
    return found


def render(status: dict[str, Any]) -> list[str]:
    """The human view."""
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
        wait = max(0.0, row["next_attempt_at"] - store.now_epoch())
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
        queue = door.get("telegram_queue")
        if isinstance(queue, dict):
            lines.append(
                "telegram queue: "
                + ", ".join(
                    f"{name}={queue.get(name)}"
                    for name in ("depth", "oldest_age_s", "last_error", "next_attempt_in_s")
                )
            )
    else:
        lines.append(f"door: did not answer at {door['url']} ({door['error']})")
    return lines
