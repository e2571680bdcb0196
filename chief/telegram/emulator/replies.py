"""Answers a client cannot read (`POST /emulator/replies`): the shapes an independent Bot API
emulator, a proxy or a newer Bot API have been seen to answer, armed per method and count.

    shape          the answer                                     the method
    no_is_bot      `ok: true`, every `is_bot` removed (a User     runs
                   python-telegram-bot cannot build)
    date_ms        `ok: true`, every `date` in milliseconds       runs
    result_null    `{"ok": true, "result": null}`                 runs
    no_message_id  `ok: true`, every `message_id` removed         runs
    empty          200 with an empty body                         runs
    html           200 with an HTML page (a proxy's)              runs
    at_once        `ok: true`, its answer as is, at once          runs; a getUpdates answers []
                                                                  at once, whatever its timeout

The method runs first (a sendMessage is kept, an edit applied, a toast recorded: Telegram took
it), then its answer is replaced by the shape. A getUpdates never runs under a shape: it answers
at once and confirms nothing, so no update is lost to a shape. `"replace": true` forgets the
shapes armed before; `/emulator/reset` forgets them all."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

SHAPES = frozenset(
    {"no_is_bot", "date_ms", "result_null", "no_message_id", "empty", "html", "at_once"}
)
MAX_COUNT = 1_000_000
HTML_PAGE = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


@dataclass
class ArmedShape:
    """One armed shape: the next `remaining` calls of `methods` (lower case) answer it."""

    shape: str
    remaining: int
    methods: frozenset[str]

    def as_dict(self) -> dict[str, Any]:
        return {"shape": self.shape, "remaining": self.remaining, "methods": sorted(self.methods)}


class ReplyShapes:
    """The shapes armed, in the order they were armed; the first that matches a call is used."""

    def __init__(self) -> None:
        self.armed: list[ArmedShape] = []

    def arm(self, document: Any) -> ArmedShape:
        """Arm the shape a control request names (ValueError saying what is wrong)."""
        if not isinstance(document, dict):
            raise ValueError("a reply shape is a JSON object")
        shape = document.get("shape")
        if shape not in SHAPES:
            raise ValueError(f"shape must be one of {sorted(SHAPES)}, got {shape!r}")
        count = document.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}")
        methods = document.get("methods")
        if (
            not isinstance(methods, list)
            or not methods
            or not all(isinstance(m, str) for m in methods)
        ):
            raise ValueError("methods must be a non-empty list of Bot API method names")
        if document.get("replace", False) is True:
            self.armed.clear()
        armed = ArmedShape(shape, count, frozenset(m.lower() for m in methods))
        self.armed.append(armed)
        return armed

    def take(self, method: str) -> str | None:
        """The shape the next call of `method` answers (one use of it), or None."""
        for armed in self.armed:
            if method in armed.methods:
                armed.remaining -= 1
                if armed.remaining <= 0:
                    self.armed.remove(armed)
                return armed.shape
        return None

    def clear(self) -> None:
        self.armed.clear()


def render(shape: str, result: Any) -> Response:
    """The answer `shape` makes of a method's `result`."""
    if shape == "empty":
        return Response(b"", status_code=200, media_type="application/json")
    if shape == "html":
        return Response(HTML_PAGE, status_code=200, media_type="text/html")
    if shape == "result_null":
        result = None
    elif shape == "no_is_bot":
        result = _without(result, "is_bot")
    elif shape == "no_message_id":
        result = _without(result, "message_id")
    elif shape == "date_ms":
        result = _dates_in_ms(result)
    body = json.dumps({"ok": True, "result": result}).encode()
    return Response(body, status_code=200, media_type="application/json")


def _without(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_without(item, key) for item in value]
    return value


def _dates_in_ms(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: v * 1000 if k == "date" and isinstance(v, int) else _dates_in_ms(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_dates_in_ms(item) for item in value]
    return value
