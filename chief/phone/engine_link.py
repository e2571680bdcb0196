"""The phone's link to the ledger service (`coop serve`): the reverse of the notify door.

    EngineLink(socket_path, service_key, timeout_s)
      summary()   GET /api/coop/phone/summary: open todos and requests, the oldest pending
                  item, the engine's outbox (what /status shows)
      answer(answer_key, request_id, ask_key, choice= | text=)
                  POST /api/coop/phone/answer: the owner's answer from the phone, applied by
                  the ledger once per answer key; its outcome and a one-line detail

Over the service's Unix socket only (`COOP_SERVICE_SOCKET`, httpx's `uds` transport, never
through a proxy: `trust_env=False`), and each call only after `plumbing.unix.check_private`
has proved the socket this user's, in a folder nobody else can write (so nobody else can have
put it there): a TCP port proved nothing, since whoever listened on it while the service was
down received the key. Then the service key goes in `X-Coop-Service-Key`, the header the door
itself checks. Every call is bounded by `timeout_s` (the phone's commands answer within 2 s).
One keep-alive client from `open` to its end.

Errors (chief.errors): nothing listens (no socket, nobody holds it), or nothing answers within
the bound: `EngineUnreachable` (`coop serve` is not running, says /status); a socket that is
not private to this user (nothing sent), or any other failure (a refused key, a 5xx, an
answer that is not a JSON object): `EngineUnavailable`, naming what is wrong.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from chief.errors import EngineUnavailable, EngineUnreachable
from plumbing import unix
from plumbing.wire import SERVICE_KEY_HEADER

SUMMARY_PATH = "/api/coop/phone/summary"
ANSWER_PATH = "/api/coop/phone/answer"
# A command answers within 2 s: the engine's part of it gets this much.
ENGINE_TIMEOUT_S = 1.5
#: The origin of every call over the socket: a loopback Host, as the service's guard wants.
SOCKET_ORIGIN = "http://localhost"


class EngineLink:
    """The ledger service's phone routes, as the door calls them."""

    def __init__(
        self, socket_path: str, service_key: str, timeout_s: float = ENGINE_TIMEOUT_S
    ) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._headers = {SERVICE_KEY_HEADER: service_key}
        self._client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[EngineLink]:
        """Keep one keep-alive client open for the block."""
        transport = httpx.AsyncHTTPTransport(uds=self.socket_path)
        async with httpx.AsyncClient(
            transport=transport, timeout=self.timeout_s, trust_env=False
        ) as client:
            self._client = client
            try:
                yield self
            finally:
                self._client = None

    async def summary(self) -> dict[str, Any]:
        """The ledger's summary for /status, /todos and /requests."""
        return await self._call("GET", SUMMARY_PATH)

    async def answer(
        self,
        answer_key: str,
        request_id: int,
        ask_key: str,
        choice: str | None = None,
        text: str | None = None,
    ) -> dict[str, Any]:
        """The owner's answer (a button's `choice`, or a reply's `text`: exactly one) to the
        question `ask_key` (request `request_id`: the ledger applies it only while that
        request bears that key), keyed by `answer_key`: a retry with the same key answers the
        first outcome and changes nothing. `{"outcome", "detail", "request"}`;
        EngineUnreachable when the ledger service does not answer (the answer stays pending),
        EngineUnavailable for anything else it says (a 503 while its store fails, a refused
        key)."""
        body: dict[str, Any] = {
            "answer_key": answer_key,
            "request_id": request_id,
            "ask_key": ask_key,
        }
        body |= {"choice": choice} if choice is not None else {"text": text}
        return await self._call("POST", ANSWER_PATH, body)

    async def _call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        client = self._client
        if client is None:
            raise EngineUnavailable("the door's link to the ledger service is not open")
        self._check()
        try:
            answer = await client.request(
                method, SOCKET_ORIGIN + path, json=body, headers=self._headers
            )
        except httpx.TimeoutException as exc:
            raise EngineUnreachable(
                f"the ledger service at {self.socket_path} did not answer within "
                f"{self.timeout_s:g} s (is coop serve stuck?)",
                timed_out=True,
            ) from exc
        except httpx.HTTPError as exc:
            raise EngineUnreachable(
                f"the ledger service (coop serve) is not running at {self.socket_path} "
                f"({type(exc).__name__}); start it, or fix COOP_SERVICE_SOCKET"
            ) from exc
        return _document(answer, path)

    def _check(self) -> None:
        """The socket proved this user's and private before a byte (the key) is sent."""
        try:
            unix.check_private(self.socket_path)
        except FileNotFoundError as exc:
            raise EngineUnreachable(
                f"the ledger service (coop serve) is not running: nothing listens at "
                f"{self.socket_path}; start it, or fix COOP_SERVICE_SOCKET"
            ) from exc
        except PermissionError as exc:
            raise EngineUnavailable(f"the ledger service's socket is not trusted: {exc}") from exc


def _document(answer: httpx.Response, path: str) -> dict[str, Any]:
    """The answer's JSON object, or EngineUnavailable naming what came back."""
    try:
        document = answer.json()
    except ValueError:
        document = None
    if answer.status_code != 200 or not isinstance(document, dict):
        detail = document.get("detail") if isinstance(document, dict) else None
        raise EngineUnavailable(
            f"the ledger service answered {path} with {answer.status_code}"
            + (f": {detail}" if detail else "")
        )
    return document
