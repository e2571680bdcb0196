"""A service's refusals on its `/metrics`: `<name>_total{reason}` read from the guard's
`plumbing.refusals.RefusalTally` at each scrape, so the metric counts every refusal while the
log sums them up a minute at a time. The door (`coop_door_refusals_total`) and the engine
service (`coop_service_refusals_total`) both register one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily

from plumbing.refusals import RefusalTally


class RefusalCollector:
    """`<name>_total{reason}` read from a `RefusalTally` at each scrape: the guard counts there,
    so a refusal costs no metric call of its own."""

    def __init__(self, name: str, tally: RefusalTally) -> None:
        self.name = name
        self.tally = tally

    def describe(self) -> list[Any]:
        return [self._family()]

    def collect(self) -> Iterator[Any]:
        family = self._family()
        for reason, count in sorted(self.tally.totals().items()):
            family.add_metric([reason], count)
        yield family

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(
            self.name,
            "Requests the guard refused, by reason (every one; the log sums them up).",
            labels=["reason"],
        )
