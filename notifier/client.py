"""The door seam: one POST per outbox row to the Chief's notify door, and a double beside it.

    POST /api/coop/engine/notify   over the door's Unix socket   X-Coop-Service-Key: <key>
    {"text": ..., "kind": ..., "outbox_id": "<the row's delivery key>"}
    and the row's extra fields, when it has them: "ask", "settles", "ring", "urgent"

`HttpDoorClient` talks to the door only on its Unix socket (`COOP_DOOR_SOCKET`), and before each
request checks that the socket and its folder are this user's and private
(`plumbing.unix.check_private`): the key goes to nobody else (a squatter on a port gets nothing,
and cannot create the socket). It keeps one keep-alive httpx transport (its connection pool) for
the worker's life and hands it each request directly: the door is one fixed URL with no cookies,
auth or redirects, so `AsyncClient`'s per-request merging of those (about a third of httpx's
cost per request on a 2-core machine) buys nothing. Every httpx error is translated here, in one
place, into a `DoorReply` with `error` set: a door that cannot be reached is an outcome to
classify (notifier.outcome), never an exception for the drain loop. The translation tells three
apart:

    timeout              httpx.TimeoutException: the door may be busy; backed off
    not running          no socket there, or one nobody holds (ECONNREFUSED): the door is not
                         running (`refused_connection`), retried soon
    not private          the socket or its folder is not this user's alone: nothing was sent,
                         backed off (an operator must look)
    anything else        another connect failure, a dropped connection, a protocol error:
                         backed off (a connection dropped before any answer is tried once
                         more first, on a new connection: it may be a kept-alive one the door
                         let go just as the request went out)

`listening()` asks only whether something accepts a connection on the socket (a connect, no
request, no key): while the door is not running, a waiting worker asks that every retry
interval instead of trying its row, so an outage costs neither CPU nor a database write.

`FakeDoorClient` stands in for the door in unit tests: it answers from a script and records
what it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import httpx

from notifier.delivery import OutboxRow
from notifier.outcome import DoorReply
from plumbing.door import BASE_URL, not_running
from plumbing.statuses import status_phrase
from plumbing.unix import check_private
from plumbing.wire import NOTIFY_BATCH_PATH, NOTIFY_PATH, SERVICE_KEY_HEADER

USER_AGENT = "coop-notifier"


class DoorClient(Protocol):
    async def send(self, row: OutboxRow) -> DoorReply: ...

    async def send_batch(self, rows: list[OutboxRow]) -> DoorReply: ...

    async def listening(self) -> bool: ...

    async def aclose(self) -> None: ...


def payload(row: OutboxRow) -> dict[str, Any]:
    """The door's body for one row. Its `outbox_id` is the row's delivery key, never its id:
    the door deduplicates by it, and a restored or fresh coop.db reuses ids. The row's extra
    fields (`ask`, `settles`, `ring`: a request the owner may answer, a request settled, an
    answer that must not ring back) follow when it has them; an ordinary row's body is the
    three fields alone, as it always was."""
    body: dict[str, Any] = {"text": row.text, "kind": row.kind, "outbox_id": row.delivery_key}
    for name, value in (row.extra or {}).items():
        body.setdefault(name, value)  # never over the three fields the door dedupes by
    return body


class CheckedUnixTransport(httpx.AsyncBaseTransport):
    """httpx over the door's Unix socket at `path`, checked private before every request
    (`check_private` raises FileNotFoundError or PermissionError: nothing is sent)."""

    def __init__(self, path: str) -> None:
        self.path = path
        # A transport never reads the HTTP(S)_PROXY environment (only AsyncClient mounts
        # proxies), and a Unix socket has no proxy: nothing reroutes it.
        self._inner = httpx.AsyncHTTPTransport(uds=path, trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        check_private(self.path)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class HttpDoorClient:
    """The real door, over httpx on its Unix socket."""

    def __init__(
        self,
        door_socket: str,
        service_key: str,
        timeout_s: float,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._socket = door_socket
        self._url = httpx.URL(BASE_URL + NOTIFY_PATH)  # parsed once, not per row
        self._batch_url = httpx.URL(BASE_URL + NOTIFY_BATCH_PATH)
        self._timeout_s = timeout_s
        self._headers = [
            (b"Content-Type", b"application/json"),
            (b"User-Agent", USER_AGENT.encode("ascii")),
            (SERVICE_KEY_HEADER.encode("ascii"), service_key.encode("ascii")),
        ]
        self._extensions = {"timeout": httpx.Timeout(timeout_s).as_dict()}
        # Tests pass httpx.MockTransport.
        self._transport = transport or CheckedUnixTransport(door_socket)

    async def send(self, row: OutboxRow) -> DoorReply:
        return await self._post(self._url, payload(row))

    async def send_batch(self, rows: list[OutboxRow]) -> DoorReply:
        """One POST of `rows` to the batch route: `{"items": [<payload>, ...]}`."""
        return await self._post(self._batch_url, {"items": [payload(row) for row in rows]})

    async def _post(self, url: httpx.URL, document: object) -> DoorReply:
        body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
        try:
            request = httpx.Request(
                "POST",
                url,
                headers=self._headers,
                content=body,
                extensions=self._extensions,
            )
            try:
                response, content = await self._exchange(request)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                # The door closed the connection before any answer: most likely a kept-alive
                # one it let go (its gate gives the place of the connection quiet longest to a
                # newcomer at its cap) just as this request went out on it. Once more, on a new
                # connection; the door deduplicates by the rows' outbox_id.
                response, content = await self._exchange(request)
        except httpx.TimeoutException as exc:
            return DoorReply(error=f"timeout after {self._timeout_s:g}s ({type(exc).__name__})")
        except FileNotFoundError:
            return DoorReply(error=not_running(self._socket), refused_connection=True)
        except PermissionError as exc:
            return DoorReply(error=str(exc))
        except httpx.ConnectError as exc:
            if connection_refused(exc):
                return DoorReply(error=not_running(self._socket), refused_connection=True)
            return DoorReply(error=f"cannot connect to the door at {self._socket}: {exc}")
        except httpx.HTTPError as exc:
            return DoorReply(error=f"{type(exc).__name__}: {exc}")
        except OSError as exc:  # httpx maps transport errors; this is the belt under the braces
            return DoorReply(error=f"{type(exc).__name__}: {exc}")
        return DoorReply(
            status=response.status_code,
            body=content,
            retry_after=response.headers.get("Retry-After"),
            phrase=status_phrase(response.status_code),
        )

    async def listening(self) -> bool:
        """Whether something accepts a connection on the door's socket now: False only when
        nothing listens there (no socket, or one nobody holds); any other failure is the next
        real request's to classify (a socket that is not this user's alone is not even
        connected to: the request's own check refuses it, sending nothing)."""
        try:
            check_private(self._socket)
            stream = await anyio.connect_unix(self._socket)
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        except OSError:
            return True
        await stream.aclose()
        return True

    async def _exchange(self, request: httpx.Request) -> tuple[httpx.Response, bytes]:
        response = await self._transport.handle_async_request(request)
        try:
            return response, await response.aread()
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._transport.aclose()


def connection_refused(exc: BaseException) -> bool:
    """Whether `exc` comes of a refused connection (ECONNREFUSED) and nothing else: httpx wraps
    httpcore's error, which wraps the OSError of the connect (anyio's "All connection attempts
    failed", caused by one refusal, or by a group of them when a name has several addresses)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return True
        if isinstance(cause, BaseExceptionGroup):
            return all(connection_refused(inner) for inner in cause.exceptions)
        cause = cause.__cause__ or cause.__context__
    return False


class FakeDoorClient:
    """A scripted door for unit tests: `answer(row) -> DoorReply`, default 200 `{"ok": true}`.
    It has no batch route (404), unless `batch(rows) -> DoorReply` is given."""

    def __init__(
        self,
        answer: Callable[[OutboxRow], DoorReply] | None = None,
        batch: Callable[[list[OutboxRow]], DoorReply] | None = None,
    ) -> None:
        self.answer = answer or (lambda row: DoorReply(status=200, body=b'{"delivered":true}'))
        self.batch = batch or (lambda rows: DoorReply(status=404, body=b'{"detail":"Not Found"}'))
        self.sent: list[dict[str, Any]] = []
        self.batches: list[list[dict[str, Any]]] = []
        self.closed = False
        self.up = True  # what `listening()` answers

    async def listening(self) -> bool:
        return self.up

    async def send(self, row: OutboxRow) -> DoorReply:
        self.sent.append(payload(row))
        return self.answer(row)

    async def send_batch(self, rows: list[OutboxRow]) -> DoorReply:
        self.batches.append([payload(row) for row in rows])
        return self.batch(rows)

    async def aclose(self) -> None:
        self.closed = True
