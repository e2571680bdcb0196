"""The engine service's Prometheus metrics: `GET /metrics` on `coop serve`'s TCP listener.

Read from coop.db at each scrape (so they survive restarts and count what one-shot drainers in
other processes did too), with one read-only connection per scrape:

    coop_outbox_rows{state}                  gauge      rows pending, delivered, cancelled
    coop_outbox_oldest_pending_age_seconds   gauge      age of the oldest pending row (0: none)
    coop_outbox_deliveries_total             counter    rows delivered
    coop_outbox_cancellations_total          counter    rows an operator cancelled
    coop_outbox_delivery_attempts            histogram  attempts each delivered row took
    coop_outbox_commit_to_delivered_seconds  histogram  from the row's commit to its delivery
    coop_worker_lock_held                    gauge      1 while a worker holds the lock
    coop_service_refusals_total{reason}      counter    requests the guard turned away, every
                                                        one (the log sums them up a minute at a
                                                        time: engine.owner.refused)

plus any registries the serving process hands in: `coop serve` (`notifier.engine_service`) adds the
notifier's in-process counters (`notifier.metrics`: deferrals by reason, drains by outcome).
All of them are registered in one registry and rendered once per scrape, in the format the
scraper asks for (`Accept`): one exposition, so an OpenMetrics answer ends with one `# EOF`
(two joined expositions make Prometheus drop the scrape: "unexpected data after # EOF").

`create_metrics_app` is the whole app `coop serve` serves on TCP (`COOP_METRICS_PORT`), for
Prometheus: `GET /metrics` and nothing else, no route that changes anything, and no key (a
key sent over TCP would go to whoever listens on the port while the service is down, and the
service key grants the phone's writes). Its guard is the service's loopback guard (loopback
peer, no browser or proxy header, a loopback Host). Everything else is on the service's Unix
socket.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import Response

from engine import store
from engine.errors import GuardRefused
from engine.owner.app import guard_request
from engine.owner.refused import ServiceRefusals
from engine.store import queue
from plumbing.http.body import refusal

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

METRICS_PATH = "/metrics"

log = structlog.get_logger("engine.metrics")
STATES = ("pending", "delivered", "cancelled")
ATTEMPT_BUCKETS = (1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
# From a second (the daemon woke at once) to a day (a long outage of the door).
LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 3600.0, 86400.0)


class OutboxCollector:
    """A prometheus_client collector that reads coop.db when scraped."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def describe(self) -> list[Any]:
        return []  # read at scrape: nothing to check names against at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        conn = store.open_read_only(self.db)
        try:
            by_state = queue.counts(conn)
            oldest = queue.oldest_pending_age_s(conn)
            attempts = queue.delivered_histogram(conn, queue.ATTEMPTS, ATTEMPT_BUCKETS)
            latency = queue.delivered_histogram(
                conn, queue.COMMIT_TO_DELIVERED_S, LATENCY_BUCKETS_S
            )
            locked = 0 if queue.holder(conn) is None else 1
        finally:
            conn.close()
        rows = GaugeMetricFamily("coop_outbox_rows", "Outbox rows by state.", labels=["state"])
        for state in STATES:
            rows.add_metric([state], by_state.get(state, 0))
        yield rows
        yield GaugeMetricFamily(
            "coop_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending outbox row in seconds (0 when none is pending).",
            value=max(oldest or 0.0, 0.0),
        )
        yield CounterMetricFamily(
            "coop_outbox_deliveries", "Outbox rows delivered.", value=by_state.get("delivered", 0)
        )
        yield CounterMetricFamily(
            "coop_outbox_cancellations",
            "Outbox rows an operator cancelled.",
            value=by_state.get("cancelled", 0),
        )
        yield _histogram(
            HistogramMetricFamily,
            "coop_outbox_delivery_attempts",
            "Delivery attempts each delivered row took (1: delivered at the first attempt).",
            ATTEMPT_BUCKETS,
            attempts,
        )
        yield _histogram(
            HistogramMetricFamily,
            "coop_outbox_commit_to_delivered_seconds",
            "Seconds from an outbox row's commit to its delivery.",
            LATENCY_BUCKETS_S,
            latency,
        )
        yield GaugeMetricFamily(
            "coop_worker_lock_held", "1 while a worker holds the worker lock, else 0.", value=locked
        )


def _histogram(
    family: Any, name: str, help_text: str, buckets: tuple[float, ...], row: tuple[Any, ...]
) -> Any:
    counts = [int(value or 0) for value in row[: len(buckets)]]
    total, value_sum = int(row[len(buckets)] or 0), float(row[len(buckets) + 1] or 0.0)
    points = [(repr(bound), count) for bound, count in zip(buckets, counts, strict=True)]
    points.append(("+Inf", total))
    return family(name, help_text, buckets=points, sum_value=value_sum)


def mount_metrics(app: FastAPI, db: Path, extra: Sequence[CollectorRegistry] = ()) -> None:
    """Serve `GET /metrics` for the ledger at `db` (see the module docstring)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    from plumbing.http.refusals import RefusalCollector

    registry = CollectorRegistry()
    registry.register(OutboxCollector(db))  # type: ignore[arg-type]
    refusals = getattr(app.state, "refusals", None)  # the owner app's (`create_app`)
    if isinstance(refusals, ServiceRefusals):
        registry.register(RefusalCollector("coop_service_refusals", refusals.tally))
    for each in extra:
        registry.register(each)  # a registry is a collector too: one exposition, one `# EOF`

    @app.get(METRICS_PATH, dependencies=[Depends(guard_request)], include_in_schema=False)
    async def scrape(request: Request) -> Response:
        # The format the scraper asks for (Prometheus says so in Accept): text 0.0.4 by default.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        try:
            body = await anyio.to_thread.run_sync(encode, registry)
        except sqlite3.Error as exc:
            raise HTTPException(503, f"coop.db could not be read: {exc}") from exc
        return Response(body, headers={"Content-Type": content_type})


def create_metrics_app(
    db: Path, extra: Sequence[CollectorRegistry] = (), refusals: ServiceRefusals | None = None
) -> FastAPI:
    """The app of `coop serve`'s TCP listener: `GET /metrics` alone (with the owner app's
    `refusals`, so its guard's refusals are counted where Prometheus looks)."""
    app = FastAPI(title="Coop engine metrics", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.refusals = refusals

    async def guard_refused(request: Request, exc: Exception) -> Response:
        # The guard runs here as the route's dependency: its refusal answered with its status
        # and counted with the owner app's, never a 500.
        if not isinstance(exc, GuardRefused):  # registered for this class only
            raise exc
        if refusals is not None:
            refusals.say(exc, request.client.host if request.client else None, request.url.path)
        return refusal(exc.status, exc.message)

    app.add_exception_handler(GuardRefused, guard_refused)
    mount_metrics(app, db, extra)
    return app
