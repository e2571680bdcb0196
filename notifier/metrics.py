"""The notifier's in-process counters: what only the running worker sees, never stored.

    coop_outbox_deferrals_total{reason}   counter  deferred attempts, by why the door failed
    coop_worker_drains_total{outcome}     counter  drains that gave the worker lock back, by how:
                                                   released (the idle handoff), stopped, max_runs

Everything else about the outbox (rows by state, the oldest pending row, deliveries,
cancellations, attempts per delivered row, commit to delivered time, the lock) is read from
coop.db at scrape time by `engine.metrics`, so it also counts the rows one-shot drainers in
other processes delivered.

The worker calls `record_attempt` and `record_drain` (one line each). They count only in a
process that serves the metrics: `coop serve` calls `enable()` when it mounts `/metrics`, and
gets the registry to expose beside its own. Elsewhere (a one-shot drainer, `coop-notifier`)
they do nothing, and prometheus_client is never imported: it costs a cold drainer ~0.1 s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from notifier.outcome import Deferred, DoorReply, Outcome

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# The door's 503 details worth a reason of their own (a fixed set: the label stays bounded).
DOOR_DETAILS = frozenset(
    {
        "notification_channel_unavailable",
        "chief_unavailable",
        "posture_unavailable",
        "owner_unconfigured",
    }
)
DRAIN_OUTCOMES = ("released", "stopped", "max_runs")


class NotifierMetrics:
    """The counters, in a registry of their own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter

        self.registry = CollectorRegistry()
        self.deferrals = Counter(
            "coop_outbox_deferrals",
            "Delivery attempts deferred by this process's notifier, by reason: the door's 503 "
            "detail (notification_channel_unavailable, ...), http_<status>, no_answer or "
            "malformed_answer.",
            ["reason"],
            registry=self.registry,
        )
        self.drains = Counter(
            "coop_worker_drains",
            "Drains that handed the worker lock back, by outcome: released (idle handoff), "
            "stopped, max_runs.",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in DRAIN_OUTCOMES:
            self.drains.labels(outcome=outcome)


_enabled: NotifierMetrics | None = None


def enable() -> CollectorRegistry:
    """Start counting in this process; the registry to expose (the same one on every call)."""
    global _enabled  # one set of counters per process, as its /metrics serves
    if _enabled is None:
        _enabled = NotifierMetrics()
    return _enabled.registry


def deferral_reason(reply: DoorReply) -> str:
    """Why the door's reply was a deferral, as a bounded label."""
    if reply.status is None:
        return "no_answer"
    if 200 <= reply.status < 300:
        return "malformed_answer"
    if reply.status == 503:
        try:
            detail = json.loads(reply.body).get("detail")
        except (ValueError, AttributeError, UnicodeDecodeError):
            detail = None
        if detail in DOOR_DETAILS:
            return str(detail)
    return f"http_{reply.status}"


def record_attempt(reply: DoorReply, outcome: Outcome, applied: bool) -> None:
    """Count one recorded attempt (a row cancelled in flight counts nothing). A row the door
    refused in a batch answered 200 is `refused_row`, not the batch's status."""
    if _enabled is not None and applied and isinstance(outcome, Deferred):
        reason = "refused_row" if outcome.refused else deferral_reason(reply)
        _enabled.deferrals.labels(reason=reason).inc()


def record_drain(outcome: str) -> None:
    """Count one drain that gave the lock back (`released`, `stopped`, `max_runs`)."""
    if _enabled is not None and outcome in DRAIN_OUTCOMES:
        _enabled.drains.labels(outcome=outcome).inc()
