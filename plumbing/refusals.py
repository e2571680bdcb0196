"""Refusals counted, not logged one line each: a service's guard notes every request it turns
away here, and logs only the summaries this answers.

    tally = RefusalTally()                      # one per service (its app), beside its guard
    summary = tally.refused("service_key", peer="127.0.0.1", path="/api/...")
    if summary is not None:                     # the first of a reason at once, then at most
        log.warning("door.refused", **summary.fields())   # one line a minute per reason
    tally.totals()                              # every refusal by reason, for /metrics
    tally.flush()                               # the summaries not yet said (at the stop)

A client without a key can send thousands of requests a second, and one line each drowns the
log (journald's rate limit then drops the real lines, not the flood's). So each reason says its
first refusal at once (an operator sees the trouble start), then holds its count: the next
refusal of that reason at least `interval_s` after the last line says how many came since, from
how many peers (the first one named), and since how long. The totals count every one, so the
metric is exact while the log stays quiet. The tally holds a bounded number of peers per reason
(`MAX_PEERS`, then only counted) and one entry per reason: the caller's reasons are its own
fixed words, never a value from the request.

Thread-safe (a guard may run in a worker thread); standard library only.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: At most one summary line per reason this often.
SUMMARY_INTERVAL_S = 60.0
#: Distinct peers remembered per reason between two lines (past it, new ones are only counted).
MAX_PEERS = 1_000


@dataclass(frozen=True)
class Summary:
    """One log line's worth: `count` refusals of `reason` since the last line (`since_s`, None
    for a reason's first line), from `peers` distinct peers, the first of them `peer`, on
    `path` (the first refused path, when the service names one)."""

    reason: str
    count: int
    peer: str | None
    peers: int
    since_s: float | None
    path: str | None = None

    def fields(self) -> dict[str, object]:
        """The summary as a log event's fields (no `path` when none was given)."""
        found: dict[str, object] = {
            "reason": self.reason,
            "count": self.count,
            "peer": self.peer,
            "peers": self.peers,
            "since_s": self.since_s,
        }
        if self.path is not None:
            found["path"] = self.path
        return found


@dataclass
class _Pending:
    """One reason's refusals since its last line."""

    logged_at: float = -math.inf  # the clock's seconds at the last line; none yet: say at once
    count: int = 0
    first_peer: str | None = None
    first_path: str | None = None
    peers: set[str] = field(default_factory=set)
    more_peers: int = 0  # distinct peers past the remembered ones (counted, not exact)

    def add(self, peer: str | None, path: str | None) -> None:
        if self.count == 0:
            self.first_peer, self.first_path = peer, path
        self.count += 1
        key = peer or "-"
        if key in self.peers:
            return
        if len(self.peers) < MAX_PEERS:
            self.peers.add(key)
        else:
            self.more_peers += 1

    def summary(self, reason: str, now: float) -> Summary:
        since = None if self.logged_at == -math.inf else round(now - self.logged_at, 1)
        return Summary(
            reason=reason,
            count=self.count,
            peer=self.first_peer,
            peers=len(self.peers) + self.more_peers,
            since_s=since,
            path=self.first_path,
        )


class RefusalTally:
    """One service's refusals: every one counted by reason, summed up in at most one line per
    reason every `interval_s` (see the module docstring)."""

    def __init__(
        self,
        interval_s: float = SUMMARY_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._totals: dict[str, int] = {}

    def refused(
        self, reason: str, *, peer: str | None = None, path: str | None = None
    ) -> Summary | None:
        """Count one refusal; the summary to log now, or None while its reason keeps quiet."""
        with self._lock:
            self._totals[reason] = self._totals.get(reason, 0) + 1
            pending = self._pending.setdefault(reason, _Pending())
            pending.add(peer, path)
            now = self._clock()
            if now - pending.logged_at < self.interval_s:
                return None
            summary = pending.summary(reason, now)
            self._pending[reason] = _Pending(logged_at=now)
            return summary

    def flush(self) -> list[Summary]:
        """The summaries of every reason with refusals not yet said (a service's stop), each
        reason's count starting again from zero."""
        with self._lock:
            now = self._clock()
            found = [
                pending.summary(reason, now)
                for reason, pending in self._pending.items()
                if pending.count
            ]
            for summary in found:
                self._pending[summary.reason] = _Pending(logged_at=now)
            return found

    def totals(self) -> dict[str, int]:
        """Every refusal since the start, by reason."""
        with self._lock:
            return dict(self._totals)
