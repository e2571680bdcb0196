"""The engine service's guard refusals (`engine.errors.GuardRefused`, raised before the body is
read), counted and summed up by `engine.owner.app.GuardBeforeBody` over the service's
`plumbing.refusals.RefusalTally`, not logged one line each.

A keyless client can send thousands of requests a second; one `owner.refused` or
`phone.refused` line each drowned the log (journald's rate limit then drops the real lines). So
a reason's first refusal is one line at once, then at most one summary line a minute (count,
first peer, since), and `coop_service_refusals_total{reason}` on `/metrics` counts every one.
A refusal after the guard (a route's own: a bad digest, a refused command, the store) needs a
key and stays one line each (`engine.owner.app._refuse`).
"""

from __future__ import annotations

import structlog

from engine.errors import GuardRefused
from plumbing.refusals import RefusalTally

# The loggers keep their names (engine.service): operators' log queries look for them.
log = structlog.get_logger("engine.service")


class ServiceRefusals:
    """One service's guard refusals: the tally (its totals are `/metrics`' counter) and the
    event each reason is said as."""

    def __init__(self) -> None:
        self.tally = RefusalTally()
        self._events: dict[str, str] = {}

    def say(self, refused: GuardRefused, peer: str | None, path: str) -> None:
        """Count `refused`; log its event only when its reason's summary is due."""
        self._events.setdefault(refused.reason, refused.event)
        summary = self.tally.refused(refused.reason, peer=peer, path=path)
        if summary is not None:
            log.warning(refused.event, status=refused.status, **summary.fields())

    def say_pending(self) -> None:
        """The summaries the last minute had not said yet (the service's stop)."""
        for summary in self.tally.flush():
            log.warning(self._events.get(summary.reason, "owner.refused"), **summary.fields())
