"""The door's Prometheus metrics: `GET /metrics`, and the counters it reads, kept apart from the
verbs they count.

    coop_door_requests_total{path,status}      counter    door answers by path and HTTP status
    coop_door_notify_duration_seconds          histogram  notify handling time, request to answer
    coop_telegram_sends_total{result}          counter    ok | 429 | 5xx | timeout | other
    coop_telegram_retry_after_seconds          histogram  the Retry-After Telegram asked for
    coop_chief_undelivered_reports             gauge      reports queued, not yet landed (read
                                                          from chief.db at each scrape)
    coop_telegram_queue_depth                  gauge      rows queued for Telegram, not yet rung
    coop_telegram_queue_oldest_age_seconds     gauge      age of the oldest of them, 0 when none
    coop_telegram_in_doubt_events              gauge      sends whose outcome the door could not
                                                          know, each of whose rows may ring once
                                                          more, marked, since chief.db began
                                                          (the three read from chief.db at each
                                                          scrape; 0 when Telegram is not configured)
    coop_telegram_answers_pending              gauge      the owner's answers from the phone
                                                          recorded and not yet applied by the
                                                          ledger (coop serve down, or slow; read
                                                          from chief.db at each scrape)
    coop_urgent_rings_total                    counter    urgent rings Telegram took (all of them)
    coop_urgent_acknowledgements_total         counter    urgent reports acknowledged, once each
    coop_urgent_expiries_total                 counter    urgent reports expired unacknowledged
    coop_escalations_total{rung}               counter    urgent reports that climbed to a rung
                                                          of their ladder (2: the second
                                                          person, 3: the fallback channel)
    coop_fallback_sends_total{result}          counter    messages through the fallback channel
                                                          (chief.fallback): sent | failed (the
                                                          channel refused or was unreachable) |
                                                          repeated (sent again after the door
                                                          stopped in its send window)
    coop_telegram_strangers_total              counter    updates from anyone but the obeyed user
                                                          in the obeyed chat (nothing changed,
                                                          nothing answered; chief.phone.updater)
    coop_door_refusals_total{reason}           counter    requests the guard turned away, every
                                                          one (the log sums them up a minute at
                                                          a time: chief.door.guard)

The outbox counts a row delivered once the door queued it for Telegram, so a Telegram outage
shows only here: the queue's depth and age grow while every send fails.

Hooked in by two calls, `instrument_door(app, service, config, metrics)` and
`metered(sender, metrics)`: a pure ASGI middleware counts every answer (so the door's routes and
verbs carry no metric code), and the Telegram sender is wrapped to count each send by result.
Each door app has its own registry: nothing is created at import, and two doors in one test
process count apart.

`GET /metrics` is served twice. On the door's Unix socket, with its other routes, it is guarded
like them (no browser or proxy header, the service key; the key also accepted as
`Authorization: Bearer <key>`). For Prometheus, `metrics_app` serves it alone on loopback TCP
(`CHIEF_METRICS_PORT`): read-only and keyless (a squatter on that port while the door is down
must get no secret from a scraper), behind the loopback peer, no browser or proxy header and a
loopback Host (a web page must not read it by DNS rebinding); every other path is 404, every
other method 405. The posture and the owner gate neither: monitoring must see a blocked or
unconfigured door too.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chief.door.config import DoorConfig
from chief.door.guard import Guard, say_refused
from chief.door.verbs import DoorVerbs
from chief.errors import ChiefError, TelegramUnavailable
from chief.fallback_rules import RESULTS as FALLBACK_RESULTS
from chief.telegram.sender import Buttons, TelegramSender, send_options
from plumbing.http.refusals import RefusalCollector
from plumbing.loopback import on_unix_socket
from plumbing.wire import NOTIFY_PATH, SERVICE_KEY_HEADER

METRICS_PATH = "/metrics"
# Paths counted by name; anything else is `other`, so a scanner cannot grow the label set.
KNOWN_PATHS = frozenset(
    {
        "/api/coop/engine/notify",
        "/api/coop/engine/notify-batch",
        "/api/coop/engine/status",
        "/api/chief/report",
        METRICS_PATH,
    }
)
TELEGRAM_RESULTS = ("ok", "429", "5xx", "timeout", "other")
# The notify answer is bounded by the report wait (2 s) plus the Telegram timeout (10 s).
NOTIFY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0, 15.0)
RETRY_AFTER_BUCKETS_S = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
# Refusals that come after the key check and say nothing about the caller: not for monitoring.
MONITORING_PASSES = frozenset({"posture_blocked", "posture_locked", "posture_unavailable"})
_KEY_HEADER = SERVICE_KEY_HEADER.lower().encode("latin-1")


class DoorMetrics:
    """One door's metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "coop_door_requests",
            "Requests the door answered, by path and HTTP status.",
            ["path", "status"],
            registry=self.registry,
        )
        self.notify_seconds = Histogram(
            "coop_door_notify_duration_seconds",
            "Time the door took to answer a notify request, from request to answer.",
            buckets=NOTIFY_BUCKETS_S,
            registry=self.registry,
        )
        self.telegram_sends = Counter(
            "coop_telegram_sends",
            "Telegram sendMessage calls by result: ok, 429 (flood control), 5xx (an error "
            "answer), timeout, other (unreachable, refused).",
            ["result"],
            registry=self.registry,
        )
        for result in TELEGRAM_RESULTS:
            self.telegram_sends.labels(result=result)
        self.retry_after = Histogram(
            "coop_telegram_retry_after_seconds",
            "Retry-After seconds Telegram asked for in its 429 answers.",
            buckets=RETRY_AFTER_BUCKETS_S,
            registry=self.registry,
        )
        self.undelivered = Gauge(
            "coop_chief_undelivered_reports",
            "Reports queued for the Master Chief that have not landed yet (read at scrape).",
            registry=self.registry,
        )
        self._chief_db_gauges()
        self._urgent_counters()
        self.fallback_sends = Counter(
            "coop_fallback_sends",
            "Messages through the fallback channel by result: sent, failed (the channel refused "
            "or could not be reached), repeated (sent again after the door stopped while "
            "sending it).",
            ["result"],
            registry=self.registry,
        )
        for result in FALLBACK_RESULTS:
            self.fallback_sends.labels(result=result)
        self.strangers = Counter(
            "coop_telegram_strangers",
            "Telegram updates from anyone but the obeyed user in the obeyed chat: nothing "
            "changed, nothing answered.",
            registry=self.registry,
        )

    def _urgent_counters(self) -> None:
        """Urgent reports (chief.phone.urgent): rings sent, acknowledgements, expiries."""
        self.urgent = {
            kind: Counter(f"coop_urgent_{kind}", words, registry=self.registry)
            for kind, words in (
                ("rings", "Urgent rings Telegram took (the first and every repeat)."),
                ("acknowledgements", "Urgent reports the owner acknowledged (once each)."),
                ("expiries", "Urgent reports that stopped ringing unacknowledged."),
            )
        }

        self.escalations = Counter(
            "coop_escalations",
            "Urgent reports nobody acknowledged in time that climbed to a rung of their ladder "
            "(2: the second person's chat, 3: the fallback channel).",
            ["rung"],
            registry=self.registry,
        )

    def count_escalation(self, rung: int) -> None:
        """One urgent report climbed to `rung` (`chief.phone.urgent`)."""
        self.escalations.labels(rung=str(rung)).inc()

    def count_urgent(self, kind: str) -> None:
        """One urgent ring, acknowledgement or expiry (`chief.phone.urgent`)."""
        self.urgent[kind].inc()

    def count_fallback(self, result: str) -> None:
        """One message through the fallback channel, by result
        (`chief.fallback.task`)."""
        self.fallback_sends.labels(result=result).inc()

    def _chief_db_gauges(self) -> None:
        """The gauges read from chief.db at each scrape (`_read_gauges`)."""
        self.telegram_depth = Gauge(
            "coop_telegram_queue_depth",
            "Rows queued for Telegram and not rung yet (read at scrape; 0 without Telegram).",
            registry=self.registry,
        )
        self.telegram_oldest_age = Gauge(
            "coop_telegram_queue_oldest_age_seconds",
            "Age of the oldest row queued for Telegram, 0 when none is (read at scrape).",
            registry=self.registry,
        )
        self.telegram_in_doubt = Gauge(
            "coop_telegram_in_doubt_events",
            "Telegram sends whose outcome the door could not know; their rows may ring once more"
            " (read at scrape).",
            registry=self.registry,
        )
        self.answers_pending = Gauge(
            "coop_telegram_answers_pending",
            "The owner's answers from the phone recorded and not yet applied by the ledger"
            " (read at scrape).",
            registry=self.registry,
        )

    def count_stranger(self) -> None:
        self.strangers.inc()

    def count_answer(self, path: str, status: int, elapsed_s: float) -> None:
        label = path if path in KNOWN_PATHS else "other"
        self.requests.labels(path=label, status=str(status)).inc()
        if path == NOTIFY_PATH:
            self.notify_seconds.observe(elapsed_s)

    def count_send_failure(self, exc: TelegramUnavailable) -> None:
        if exc.retry_after_s is not None:
            self.telegram_sends.labels(result="429").inc()
            self.retry_after.observe(exc.retry_after_s)
            return
        self.telegram_sends.labels(result=_failure_result(exc)).inc()


def _failure_result(exc: TelegramUnavailable) -> str:
    from telegram.error import NetworkError, TelegramError, TimedOut

    cause = exc.__cause__
    if isinstance(cause, TimedOut):
        return "timeout"
    # python-telegram-bot answers a 5xx (and any status it has no class for) with a plain
    # NetworkError of its own making; a transport failure is a NetworkError caused by httpx's.
    if type(cause) is NetworkError and (
        cause.__cause__ is None or isinstance(cause.__cause__, TelegramError)
    ):
        return "5xx"
    return "other"


class _AnswerCounter:
    """Pure ASGI middleware: counts each HTTP answer by path and status, and times notify."""

    def __init__(self, app: ASGIApp, metrics: DoorMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if the app fails before it starts an answer

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            self.metrics.count_answer(
                str(scope.get("path", "")), status, time.perf_counter() - started
            )


class _MeteredSender:
    """The door's Telegram sender, counting each send by result (everything else passes on)."""

    def __init__(self, inner: Any, metrics: DoorMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    async def send(
        self,
        text: str,
        *,
        silent: bool = False,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
        chat: int | str | None = None,
    ) -> int | None:
        options = send_options(buttons, reply_to, chat)  # passed on only when given
        try:
            message_id: int | None = await self._inner.send(text, silent=silent, **options)
        except TelegramUnavailable as exc:
            self._metrics.count_send_failure(exc)
            raise
        self._metrics.telegram_sends.labels(result="ok").inc()
        return message_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _with_bearer_as_key(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`Authorization: Bearer <key>` presented as the service key header the guard checks."""
    extra = []
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                extra.append((_KEY_HEADER, token.strip()))
    return headers + extra


def metrics_router(config: DoorConfig, service: DoorVerbs, metrics: DoorMetrics) -> APIRouter:
    """`GET /metrics` over `metrics`, guarded as described in the module docstring."""
    guard = Guard(config, service.posture)
    router = APIRouter()

    @router.get(METRICS_PATH, include_in_schema=False)
    async def scrape(request: Request) -> Response:
        client = request.scope.get("client")
        peer = client[0] if client else None
        headers = _with_bearer_as_key(list(request.scope.get("headers", [])))
        refusal = guard.check(
            peer, headers, owner_configured=True, unix_socket=on_unix_socket(request.scope)
        )
        if refusal is not None and refusal.reason not in MONITORING_PASSES:
            return JSONResponse({"detail": refusal.reason}, status_code=refusal.status)
        await _read_gauges(service, metrics)
        # The format the scraper asks for (Prometheus says so in Accept): text 0.0.4 by default.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(metrics.registry), headers={"Content-Type": content_type})

    return router


def metrics_app(config: DoorConfig, service: DoorVerbs, metrics: DoorMetrics) -> FastAPI:
    """`GET /metrics` alone, keyless, for the loopback TCP listener (the module docstring)."""
    guard = Guard(config, service.posture)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get(METRICS_PATH, include_in_schema=False)
    async def scrape(request: Request) -> Response:
        client = request.scope.get("client")
        refusal = guard.check_caller(
            client[0] if client else None, request.scope.get("headers", []), unix_socket=False
        )
        if refusal is not None:
            peer = client[0] if client else None
            say_refused(service.refusals, refusal.reason, path=METRICS_PATH, peer=peer)
            return JSONResponse({"detail": refusal.reason}, status_code=refusal.status)
        await _read_gauges(service, metrics)
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(metrics.registry), headers={"Content-Type": content_type})

    return app


async def _read_gauges(service: DoorVerbs, metrics: DoorMetrics) -> None:
    """The gauges read from chief.db at each scrape; NaN (unknown, not zero) when it fails."""
    chief: Any = service.chief
    if chief is None:
        return
    for gauge, read in (
        (metrics.undelivered, chief.undelivered_count),
        (metrics.answers_pending, chief.pending_answers),
    ):
        try:
            gauge.set(await read())
        except ChiefError:
            gauge.set(float("nan"))
    try:
        depth, oldest_age_s, in_doubt = await service.telegram_queue()
    except ChiefError:
        for gauge in (
            metrics.telegram_depth,
            metrics.telegram_oldest_age,
            metrics.telegram_in_doubt,
        ):
            gauge.set(float("nan"))
    else:
        metrics.telegram_depth.set(depth)
        metrics.telegram_oldest_age.set(oldest_age_s)
        metrics.telegram_in_doubt.set(in_doubt)


def metered(sender: TelegramSender, metrics: DoorMetrics) -> TelegramSender:
    """`sender` counting each send by result; the door's sender task (the ringer) sends with it."""
    return _MeteredSender(sender, metrics)


def instrument_door(
    app: FastAPI, service: DoorVerbs, config: DoorConfig, metrics: DoorMetrics
) -> DoorMetrics:
    """Count the door's answers (Telegram sends: `metered`), and serve them on `GET /metrics`."""
    app.add_middleware(_AnswerCounter, metrics=metrics)
    app.include_router(metrics_router(config, service, metrics))
    metrics.registry.register(RefusalCollector("coop_door_refusals", service.refusals))
    app.state.metrics = metrics
    return metrics
