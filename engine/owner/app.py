"""The owner's app: the FastAPI routes of the engine service (`coop serve`, whose process is
`notifier.engine_service`: this app and the notifier daemon, in one process, on its Unix socket
`COOP_SERVICE_SOCKET`; Prometheus's `/metrics` alone is on TCP, in an app of its own,
`engine.metrics.create_metrics_app`).

    POST /compat/call       run one routed verb for a compatibility client, filed by its key
    POST /compat/reconcile  what became of a request key (files `never_arrived` if unknown)
    GET  /status            mode (service|local|invalid), whether the daemon runs, and the pid
                            of the daemon delivery is left to; nothing about the database (it
                            needs no credential)
    POST /api/coop/phone/answer, GET /api/coop/phone/summary
                            the phone's routes (`engine.owner.phone`): the owner's answers from
                            Telegram, relayed by the Chief's door with the service key, and what
                            its `/status` shows; in local mode and after a cutover alike

Guard, on the peer and the headers before any body is read (`GuardBeforeBody`, an ASGI
middleware in front of every route; the floor's rules, `plumbing.loopback`, which the Chief's
notify door reads too): the request came over the Unix socket (`on_unix_socket`), or its peer
is loopback (`peer_is_loopback`); no `Origin`, `Cookie`, `X-Forwarded-For`, `Forwarded`,
`X-Forwarded-Host`, `X-Real-IP` or session header (`browser_header`); exactly one `Host`,
naming `127.0.0.1`, `localhost` or `[::1]` (`host_is_loopback`; no DNS rebinding); for the
compat endpoints, the
`X-Coop-Owner-Key` header compared with `hmac.compare_digest` over SHA-256 digests against the
credential file the owner file names; for the phone's, the service key (`engine.owner.phone`).
Then the body is read, at most `MAX_BODY_BYTES` (413 past it, sized or chunked) and nested at
most `plumbing.http.body.MAX_JSON_DEPTH` deep (400): a caller without a key makes the service
hold nothing. The guard's refusals are counted, not logged one line each
(`engine.owner.refused`): a reason's first one at once, then one summary line a minute.

Mode is decided per request from the owner file, exactly as the clients decide it: with a valid
owner file for this database the service is the owner and runs calls; without one (local mode,
before a cutover or after its undo) it still runs the notifier daemon and `/status`, and the
compat endpoints answer 409. So a cutover or an undo needs no restart.

One writer: compat calls run one at a time, each in one worker-thread call holding a lock, on
the owner's connection (fence function registered). Domain refusals travel as a verdict in a
200 answer, never as an HTTP error. After a committed call that queued or re-armed an outbox
row, the owner kicks its in-process daemon; after one that settled a request, it wakes that
request's waiters (`coop request wait`, `engine.kick.wake_waiters`), whose sockets are beside
the store on this machine.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog
from fastapi import FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from engine import keyfile, owner, store, verbs
from engine import kick as wake
from engine.config import EngineConfig
from engine.errors import CoopError, GuardRefused, OwnerUnavailable, StoreError
from engine.owner import commands, compat, phone
from engine.owner.refused import ServiceRefusals
from plumbing.faults import fault
from plumbing.http.body import BoundedBody, refusal
from plumbing.loopback import browser_header, host_is_loopback, on_unix_socket, peer_is_loopback

#: The largest body the service reads. A routed call's arguments (a title of 500 and a text of
#: 4,000 characters, up to 6 bytes a character once escaped) fit many times over.
MAX_BODY_BYTES = 1024 * 1024

# The logger keeps its first name (engine.service): operators' log queries look for it.
log = structlog.get_logger("engine.service")


class CallBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = Field(min_length=1, max_length=100)
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    key: str = Field(min_length=8, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")
    input_sha256: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class ReconcileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")


class Owner:
    """The owner's side of the ledger: its connections, and one writer for compat calls."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def connect(self, synchronous: str = "FULL") -> sqlite3.Connection:
        """A new owner connection (fence function registered). The embedded notifier daemon
        asks for `synchronous="NORMAL"`: its delivery marks only (docs/architecture.md,
        "Durability")."""
        return owner.register_fence_function(
            store.open_connection(self.db, check_same_thread=False, synchronous=synchronous)
        )

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self.connect()
        return self._conn

    def call(self, body: CallBody) -> commands.Filed:
        with self._lock:
            fault("engine.owner.before_call")  # test-only seam: a call held in flight
            return commands.run(
                self._connection(),
                key=body.key,
                method=body.method,
                args=body.args,
                kwargs=body.kwargs,
                digest=compat.input_digest(body.method, body.args, body.kwargs),
                metadata=body.metadata,
            )

    def run_phone(self, use_case: Callable[[verbs.Unit], Any], writing: bool) -> Any:
        """One use case of the phone's routes (`engine.owner.phone`), where the owner file says:
        in local mode on a connection of its own, like any local writer (a fenced ledger
        without an owner file refuses it); after a cutover on the owner's connection, under its
        lock. A write commits before this returns."""
        try:
            route = owner.owner_config(self.db)
        except (CoopError, ValueError, KeyError) as exc:
            log.error("owner.owner_file_invalid", detail=str(exc))
            raise OwnerUnavailable(owner.INVALID_OWNER) from exc

        def settings() -> EngineConfig:  # read per call, as a routed call's are
            return EngineConfig.from_env(db=self.db)

        if route is None:
            with store.unit_of_work(self.db, writing=writing) as tx:
                found = use_case(verbs.Unit(tx=tx, config=settings))
        else:
            with self._lock:
                conn = self._connection()
                with store.write(conn) if writing else store.snapshot(conn):
                    found = use_case(verbs.Unit(tx=lambda: conn, config=settings))
        if writing:
            # Test-only seam: the answer committed, the service dies before it replies.
            fault("engine.phone.after_commit")
        return found

    def reconcile(self, key: str) -> dict[str, Any]:
        with self._lock:
            return commands.reconcile(self._connection(), key)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _refuse(status: int, reason: str, detail: str) -> HTTPException:
    log.warning("owner.refused", reason=reason, status=status)
    return HTTPException(status_code=status, detail=detail)


def _deny(status: int, reason: str, detail: str) -> GuardRefused:
    """A guard's refusal: counted and summed up by `GuardBeforeBody`, not one line each."""
    return GuardRefused(detail, status=status, reason=reason, event="owner.refused")


def guard_request(request: Request) -> None:
    """A loopback peer (or the service's own Unix socket, where the folder's permissions and the
    gate's uid check decided who may connect), no browser or proxy headers, one loopback Host:
    in that order."""
    if not on_unix_socket(request.scope) and not peer_is_loopback(
        request.client.host if request.client else None
    ):
        raise _deny(403, "peer", "the Coop owner answers loopback callers only")
    if any(browser_header(name) for name in request.headers):
        raise _deny(403, "browser_header", "browser and proxy headers are refused")
    hosts = request.headers.getlist("host")
    if len(hosts) != 1 or not host_is_loopback(hosts[0]):
        raise _deny(403, "host", "the Host header must name a loopback host")


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def check_owner_credential(request: Request, db: Path) -> dict[str, Any]:
    """The compat endpoints' guard: the loopback guard, then an owner file for `db` and the
    credential it names, in that order; the owner file's body when the caller may call."""
    guard_request(request)
    # Nothing before the credential check may name the database or its files: a caller
    # without the credential learns only that the service takes no calls.
    try:
        config = owner.owner_config(db)
    except (CoopError, ValueError, KeyError) as exc:
        log.error("owner.owner_file_invalid", detail=str(exc))
        raise _deny(503, "owner_file", owner.INVALID_OWNER) from exc
    if config is None:
        raise _deny(
            409,
            "local_mode",
            "this service is not the Coop owner (local mode): callers write locally;"
            " `coop cutover` makes it the owner",
        )
    try:
        expected = keyfile.read_private(Path(config["credential_file"]), "the owner credential")
    except (CoopError, KeyError, TypeError) as exc:
        log.error("owner.credential_unusable", detail=str(exc))
        raise _deny(503, "credential_file", "the owner credential is unusable") from exc
    given = request.headers.get(compat.CREDENTIAL_HEADER, "")
    if not hmac.compare_digest(_digest(given), _digest(expected)):
        raise _deny(401, "credential", "missing or wrong Coop owner credential")
    return config


def after_commit(db: Path, answer: object, kick: Callable[[], None] | None) -> None:
    """What follows every commit of the owner service, once it has committed: the in-process
    daemon's `kick` when the answer queued an outbox row or filed a deadline
    (`engine.kick.wakes_notifier`), then the waiters of the request the
    answer shows closed or abandoned (`engine.kick.wake_waiters`). Every route that commits
    calls it (a routed call here; the phone's answer through `_phone_runner`)."""
    if kick is not None and wake.wakes_notifier(answer):
        kick()
    settled = wake.settled_request(answer)
    if settled is not None:
        wake.wake_waiters(db, settled)


def _phone_runner(service: Owner) -> phone.Runner:
    """The phone's runner (`Owner.run_phone`), followed by the wake of the waiters of a request
    its write settled (the phone's route kicks the daemon itself). A replayed answer wakes them
    again, which costs a waiter one look: a service killed between the commit and the wake
    woke nobody the first time."""

    def run(use_case: Callable[..., Any], writing: bool) -> Any:
        found = service.run_phone(use_case, writing)
        if writing:
            after_commit(service.db, found, None)
        return found

    return run


#: A path prefix, the check its requests pass after the loopback guard, and whether the check
#: reads files (then it runs in a worker thread, as FastAPI ran it as a dependency).
Check = tuple[str, Callable[[Request], object], bool]


class GuardBeforeBody:
    """ASGI middleware in front of every route: the loopback guard (`guard_request`) and the
    route's own check (`checks`: the first whose prefix matches) on the peer and the headers,
    then the body bounded (`plumbing.http.body.BoundedBody`). A refusal answers at once,
    `{"detail": ...}` as FastAPI's, and closes the connection: the body is never read."""

    def __init__(self, app: ASGIApp, checks: Sequence[Check], refusals: ServiceRefusals) -> None:
        self.app = BoundedBody(app, max_bytes=MAX_BODY_BYTES)
        self.checks = checks
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            try:
                await self._check(request)
            except GuardRefused as exc:
                peer = request.client.host if request.client else None
                self.refusals.say(exc, peer, request.url.path)
                await refusal(exc.status, exc.message)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _check(self, request: Request) -> None:
        guard_request(request)
        for prefix, check, reads_files in self.checks:
            if request.url.path.startswith(prefix):
                if reads_files:
                    await anyio.to_thread.run_sync(check, request)
                else:
                    check(request)
                return


async def _body_refused(_: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 for a body out of shape, without each error's `input` and `ctx`: a number
    JSON cannot encode back (`1e999` reads as infinity, `NaN`) made FastAPI's own answer a 500
    with a traceback, and echoing the body tells its sender nothing it did not send."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    found = [{k: v for k, v in error.items() if k not in ("input", "ctx")} for error in errors]
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(found)})


async def _guard_refused(_: Request, exc: Exception) -> JSONResponse:
    """The guard's refusal where a route runs it as a dependency (`/metrics`): the middleware
    answered it first already, so this is the answer's shape, kept alike."""
    if not isinstance(exc, GuardRefused):  # registered for this class only
        raise exc
    return refusal(exc.status, exc.message)


def _route_checks(service: Owner, key: phone.ServiceKey) -> list[Check]:
    """Each route's check after the loopback guard: the compat routes the owner credential, the
    phone's the service key; the rest (`/status`) only the loopback guard."""

    def owner_credential(request: Request) -> dict[str, Any]:
        return check_owner_credential(request, service.db)

    return [("/compat", owner_credential, True), (phone.PREFIX, phone.guard(key), False)]


def create_app(
    service: Owner,
    kick: Callable[[], None] | None = None,
    *,
    service_key: phone.ServiceKey | None = None,
) -> FastAPI:
    """The engine service's FastAPI app; `kick` wakes the in-process notifier daemon.
    `service_key`: the phone routes' key (default: read now from `COOP_SERVICE_KEY_FILE`)."""
    app = FastAPI(title="Coop engine service", openapi_url=None, docs_url=None, redoc_url=None)
    app.add_exception_handler(RequestValidationError, _body_refused)
    app.add_exception_handler(GuardRefused, _guard_refused)  # the guard as a route's dependency
    # The phone's routes (the Chief's door relays the owner's answers, asks for `/status`).
    key = phone.ServiceKey.from_env() if service_key is None else service_key

    # The guard's refusals, counted (`coop_service_refusals_total`) and summed up in the log.
    app.state.refusals = ServiceRefusals()
    app.add_middleware(
        GuardBeforeBody, checks=_route_checks(service, key), refusals=app.state.refusals
    )

    @app.post("/compat/call")
    async def compat_call(body: CallBody) -> dict[str, Any]:
        bound = log.bind(key=body.key, method=body.method)
        if body.input_sha256 is not None:
            digest = compat.input_digest(body.method, body.args, body.kwargs)
            if not hmac.compare_digest(digest, body.input_sha256):
                raise _refuse(400, "digest", "input_sha256 does not match the input")
        try:
            filed = await anyio.to_thread.run_sync(service.call, body)
        except commands.CommandRefused as exc:
            raise _refuse(exc.status_code, "command", exc.message) from exc
        except StoreError as exc:
            # The database failed (a full disk): nothing was filed, so the caller's receipt stays
            # uncertain and `coop reconcile` answers later what became of the key.
            bound.error("owner.store_failed", error=exc.message)
            raise _refuse(503, "store", exc.message) from exc
        bound.info("owner.call", outcome=filed.outcome, replayed=filed.replayed)
        result = filed.result if isinstance(filed.result, dict) else {}
        if filed.outcome == commands.COMMITTED and body.method not in commands.READ_METHODS:
            after_commit(service.db, result, kick)
        return filed.answer()

    @app.post("/compat/reconcile")
    async def compat_reconcile(body: ReconcileBody) -> dict[str, Any]:
        try:
            answer = await anyio.to_thread.run_sync(service.reconcile, body.key)
        except StoreError as exc:
            log.error("owner.store_failed", key=body.key, error=exc.message)
            raise _refuse(503, "store", exc.message) from exc
        log.info("owner.reconcile", key=body.key, outcome=answer["outcome"])
        return answer

    app.include_router(phone.make_router(_phone_runner(service), kick))

    @app.get("/status")
    async def status() -> dict[str, Any]:
        return service_status(service.db, app.state)

    return app


def service_status(db: Path, state: Any) -> dict[str, Any]:
    """`/status`: no database path, since it answers any loopback caller, credential or not.
    While this service's daemon does not deliver, `daemon_lock_holder` is the pid of the daemon
    that holds the ledger instead (`coop status --check` names it), when there is one."""
    try:
        mode = "service" if owner.owner_config(db) is not None else "local"
    except (CoopError, ValueError, KeyError):
        mode = "invalid"
    return {
        "mode": mode,
        "daemon": getattr(state, "daemon_running", False),
        "daemon_lock_holder": getattr(state, "daemon_lock_holder", None),
    }
