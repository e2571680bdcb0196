"""The door seam: one POST per outbox row to the Chief's notify door, and a double beside it.

    POST {door_url}   X-Coop-Service-Key: <key>
    {"text": ..., "kind": ..., "outbox_id": "<id>"}

`HttpDoorClient` keeps one keep-alive `httpx.AsyncClient` for the worker's life (a connection
per row would cost a TCP handshake each). Every httpx error is translated here, in one place,
into a `DoorReply` with `error` set: a door that cannot be reached is an outcome to classify
(notifier.outcome), never an exception for the drain loop.

`FakeDoorClient` stands in for the door in unit tests: it answers from a script and records
what it was sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import httpx

from notifier.outcome import DoorReply
from notifier.store import OutboxRow

SERVICE_KEY_HEADER = "X-Coop-Service-Key"


class DoorClient(Protocol):
    async def send(self, row: OutboxRow) -> DoorReply: ...

    async def aclose(self) -> None: ...


def payload(row: OutboxRow) -> dict[str, str]:
    return {"text": row.text, "kind": row.kind, "outbox_id": str(row.id)}


class HttpDoorClient:
    """The real door, over httpx."""

    def __init__(
        self,
        door_url: str,
        service_key: str,
        timeout_s: float,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = door_url
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(
            headers={SERVICE_KEY_HEADER: service_key},
            timeout=httpx.Timeout(timeout_s),
            # The door is on loopback: an HTTP(S)_PROXY in the environment must not reroute it.
            trust_env=False,
            transport=transport,  # None: httpx's own; tests pass httpx.MockTransport
        )

    async def send(self, row: OutboxRow) -> DoorReply:
        try:
            response = await self._client.post(self._url, json=payload(row))
        except httpx.TimeoutException as exc:
            return DoorReply(error=f"timeout after {self._timeout_s:g}s ({type(exc).__name__})")
        except httpx.ConnectError as exc:
            return DoorReply(error=f"cannot connect to the door at {self._url}: {exc}")
        except httpx.HTTPError as exc:
            return DoorReply(error=f"{type(exc).__name__}: {exc}")
        except OSError as exc:  # httpx maps transport errors; this is the belt under the braces
            return DoorReply(error=f"{type(exc).__name__}: {exc}")
        return DoorReply(
            status=response.status_code,
            body=response.content,
            retry_after=response.headers.get("Retry-After"),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


class FakeDoorClient:
    """A scripted door for unit tests: `answer(row) -> DoorReply`, default 200 `{"ok": true}`."""

    def __init__(self, answer: Callable[[OutboxRow], DoorReply] | None = None) -> None:
        self.answer = answer or (lambda row: DoorReply(status=200, body=b'{"delivered":true}'))
        self.sent: list[dict[str, str]] = []
        self.closed = False

    async def send(self, row: OutboxRow) -> DoorReply:
        self.sent.append(payload(row))
        return self.answer(row)

    async def aclose(self) -> None:
        self.closed = True
