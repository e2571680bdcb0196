"""A request's body bounded before the app reads it: at most `max_bytes` (413 past it, whether
the body is sized by `Content-Length` or chunked) and JSON nested at most `max_json_depth` deep
(400 past it).

`BoundedBody` wraps an ASGI app whose routes take JSON. It answers 413 at once for a declared
`Content-Length` over the bound, reads a chunked body only up to the bound, and hands the app
the body it read in one message. Every refusal carries `Connection: close`: uvicorn then closes
the connection instead of reading and discarding the rest of the body. The nesting bound comes
before any parser: Python's `json` and FastAPI turned 100k-deep input into a `RecursionError`
they answer as a generic 400, and input just under the interpreter's recursion limit reached the
app's code whole.
"""

from __future__ import annotations

import re

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_JSON_DEPTH = 32
# A JSON string (skipped whole, escapes included) or one bracket: the tokens that nest.
_NESTING_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def json_too_deep(raw: bytes, max_depth: int) -> bool:
    """True when `raw`, read as JSON, opens more than `max_depth` arrays or objects at once."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False  # the common case, at C speed: not enough brackets to be too deep
    depth = 0
    for token in _NESTING_TOKEN.finditer(raw):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                return True
        elif mark in (b"]", b"}"):
            depth -= 1
    return False


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


def refusal(status: int, detail: str) -> JSONResponse:
    """An answer given before the body was read: `{"detail": ...}`, and the connection closed
    after it (its unread body is never read)."""
    return JSONResponse({"detail": detail}, status_code=status, headers={"Connection": "close"})


class BoundedBody:
    """`app` behind the size and nesting bounds (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, max_json_depth: int = MAX_JSON_DEPTH
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_depth = max_json_depth

    def _too_large(self) -> JSONResponse:
        return refusal(413, f"the body is larger than {self.max_bytes} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._too_large()(scope, receive, send)
            return
        body = await self._read(receive)
        if body is None:
            await self._too_large()(scope, receive, send)
            return
        if json_too_deep(body, self.max_json_depth):
            detail = f"the body's JSON nests deeper than {self.max_json_depth} levels"
            await refusal(400, detail)(scope, receive, send)
            return
        given = False

        async def replay() -> Message:
            nonlocal given
            if given:
                return await receive()  # after the body: only the disconnect is left to wait for
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | None:
        """The whole body, or None once it passes `max_bytes` (never holding more)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client left: the app sees an empty body, then that
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
