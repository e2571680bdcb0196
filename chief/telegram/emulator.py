"""A local Telegram Bot API emulator for tests and demos (`chief telegram-emulator`, loopback).

It answers the calls the door's python-telegram-bot client makes, the way the real Bot API does
(`{"ok": true, "result": ...}`, errors as `{"ok": false, "error_code": n, "description": ...}`):
`getMe` (called at initialise), `sendMessage`, and harmless `close`/`logOut`/`deleteWebhook`.
Bodies may be form-encoded (what PTB sends) or JSON. PTB's base URL is `http://127.0.0.1:P/bot`.

Every accepted message is kept: `GET /emulator/messages` answers them as JSON, and with `--log`
each is appended as one JSON line (with its receipt time). The line and the `emulator.message`
log event are written just after the answer is sent, so the sender does not wait for them. The
receipt file is opened at the first receipt and kept open (an open and a close per message cost
the emulator more than the message itself); each line is flushed as it is written, so a reader
sees it at once, and the file is closed when the emulator shuts down (its lifespan). A file
renamed away meanwhile keeps receiving lines: rotate it by copying and truncating.
Control endpoints, for tests and demos:

- `POST /emulator/faults` `{"mode": "429" | "5xx" | "delay" | "unauthorized" |
  "chat_not_found" | "bot_blocked", "count": N, "retry_after": s, "status": 5xx, "delay_s": s,
  "methods": ["sendMessage"]}`: the next N matching calls answer 429 with
  `parameters.retry_after` (nothing kept), a 5xx (nothing kept), or are kept and then answered
  only after `delay_s` (past the client's timeout, a message that was still received); the
  last three are Telegram's permanent refusals, as the Bot API answers them (nothing kept):
  `401 Unauthorized` (a bad token; arm it on getMe too, as Telegram refuses every method),
  `400 Bad Request: chat not found`, `403 Forbidden: bot was blocked by the user`;
  with `"replace": true` the armed faults are forgotten in the same step, so a test switching
  Telegram from one failure to another leaves no moment in which a send succeeds;
- `GET /emulator/calls`: how many API calls each method received, and `too_many_requests`;
- `--flood-limits` (off by default): Telegram's flood control, about 1 message/s per private
  chat with a burst of 3, 20/min per group chat (negative ids), 30/s overall; past them a
  sendMessage answers `429` with `parameters.retry_after` and `Too Many Requests: retry after N`;
- every kept message records `disable_notification` (a silent message, sent in quiet hours);
- `POST /emulator/reset`: forget messages, calls and faults (the JSON lines file is kept).

In-process: `create_emulator()` returns the ASGI app and its `EmulatorState`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qsl

import anyio
import structlog
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

log = structlog.get_logger("chief.telegram.emulator")

DEFAULT_PORT = 8081
MAX_MESSAGE_UTF16_UNITS = 4096  # the Bot API's own limit for sendMessage text, in UTF-16 units
MAX_FAULT_DELAY_S = 300.0
MAX_FAULT_COUNT = 10_000
BOT_USER: dict[str, Any] = {
    "id": 4242424242,
    "is_bot": True,
    "first_name": "Coop Emulator",
    "username": "coop_emulator_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
# Telegram's permanent refusals, with the status and description the Bot API answers.
REFUSALS = {
    "unauthorized": (401, "Unauthorized"),  # a token Telegram knows no bot by
    "chat_not_found": (400, "Bad Request: chat not found"),
    "bot_blocked": (403, "Forbidden: bot was blocked by the user"),
}
FAULT_MODES = frozenset({"429", "5xx", "delay", *REFUSALS})
# --flood-limits: Telegram's documented limits.
PER_CHAT_BURST = 3.0
PER_PRIVATE_CHAT_PER_S = 1.0
PER_GROUP_PER_S = 20.0 / 60.0
PER_BOT_BURST = 30.0
PER_BOT_PER_S = 30.0


@dataclass
class Fault:
    """One armed fault: applies to the next `remaining` calls of `methods`."""

    mode: str
    remaining: int
    methods: frozenset[str]
    retry_after_s: int = 1
    status: int = 500
    delay_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "remaining": self.remaining,
            "methods": sorted(self.methods),
            "retry_after": self.retry_after_s,
            "status": self.status,
            "delay_s": self.delay_s,
        }


@dataclass
class EmulatorState:
    """What the emulator received and what it was told to do; readable from in-process tests."""

    token: str | None = None
    log_path: Path | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    faults: list[Fault] = field(default_factory=list)
    next_message_id: int = 1
    #: Telegram's flood control (`--flood-limits`), None when off
    flood: FloodLimits | None = None
    #: sendMessage calls answered 429 by the flood control
    too_many_requests: int = 0
    _log_file: TextIO | None = field(default=None, repr=False)

    def texts(self) -> list[str]:
        return [message["text"] for message in self.messages]

    def arm(self, fault: Fault) -> None:
        self.faults.append(fault)

    def take_fault(self, method: str) -> Fault | None:
        for fault in self.faults:
            if method in fault.methods:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def keep(
        self, chat_id: int | str, text: str, *, disable_notification: bool = False
    ) -> dict[str, Any]:
        record = {
            "message_id": self.next_message_id,
            "chat_id": chat_id,
            "text": text,
            "disable_notification": disable_notification,
            "received_at": time.time(),
        }
        self.next_message_id += 1
        self.messages.append(record)
        return record

    def write_log(self, record: dict[str, Any]) -> None:
        """Append `record` to the JSON-lines log, when there is one (opened on first use and
        kept open; flushed per line)."""
        if self.log_path is None:
            return
        if self._log_file is None:
            self._log_file = self.log_path.open("a", encoding="utf-8")
        self._log_file.write(json.dumps(record) + "\n")
        self._log_file.flush()

    def close_log(self) -> None:
        """Close the receipt file (the emulator's shutdown); a later receipt opens it again."""
        handle, self._log_file = self._log_file, None
        if handle is not None:
            handle.close()

    def reset(self) -> None:
        self.messages.clear()
        self.calls.clear()
        self.faults.clear()
        self.too_many_requests = 0
        if self.flood is not None:
            self.flood = FloodLimits()


class _Bucket:
    """`capacity` sends, refilled at `per_s`; starts full."""

    def __init__(self, capacity: float, per_s: float) -> None:
        self.capacity = capacity
        self.per_s = per_s
        self.tokens = capacity
        self.at = time.monotonic()

    def wait_s(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.per_s


@dataclass
class FloodLimits:
    """Telegram's flood control as the Bot API documents it: about 1 message/s per private
    chat (a burst of 3), 20/min per group (negative ids and @channels, the same burst), 30/s
    overall. A send past them is refused 429 with `retry_after` (whole seconds, rounded up)."""

    chats: dict[str, _Bucket] = field(default_factory=dict)
    overall: _Bucket = field(default_factory=lambda: _Bucket(PER_BOT_BURST, PER_BOT_PER_S))

    def admit(self, chat_id: int | str) -> int | None:
        """None when the send may go; else the seconds Telegram would ask it to wait."""
        key = str(chat_id)
        if key not in self.chats:
            private = key.isdigit()
            self.chats[key] = _Bucket(
                PER_CHAT_BURST, PER_PRIVATE_CHAT_PER_S if private else PER_GROUP_PER_S
            )
        now = time.monotonic()
        waits = [self.chats[key].wait_s(now), self.overall.wait_s(now)]
        if max(waits) > 0:
            return max(1, math.ceil(max(waits)))
        self.chats[key].tokens -= 1.0
        self.overall.tokens -= 1.0
        return None


def _ok(result: Any) -> JSONResponse:
    return JSONResponse({"ok": True, "result": result})


def _error(code: int, description: str, **parameters: Any) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
    if parameters:
        body["parameters"] = parameters
    return JSONResponse(body, status_code=code)


async def _params(request: Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query_params)
    raw = await request.body()
    if not raw:
        return params
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        document = json.loads(raw)
        if not isinstance(document, dict):
            raise ValueError("the JSON body must be an object")
        params.update(document)
    else:
        params.update(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
    return params


def _chat(chat_id: Any) -> tuple[int | str, dict[str, Any]]:
    text = str(chat_id).strip()
    if text.lstrip("-").isdigit():
        number = int(text)
        if number < 0:
            return number, {"id": number, "type": "group", "title": "Coop group"}
        return number, {"id": number, "type": "private", "first_name": "Owner"}
    return text, {"id": -1001234567890, "type": "channel", "title": text, "username": text[1:]}


async def _delay(request: Request, delay_s: float) -> None:
    """Hold the answer `delay_s` seconds, or until the client hangs up (a client that timed
    out will never read it), so a long delay never outlives its caller."""
    with anyio.move_on_after(delay_s):
        while (await request.receive())["type"] != "http.disconnect":
            pass


def create_emulator(
    *, token: str | None = None, log_path: Path | None = None, flood_limits: bool = False
) -> tuple[Starlette, EmulatorState]:
    """The emulator's ASGI app and its state (`token=None` accepts any token; `flood_limits`:
    answer 429 past Telegram's flood limits)."""
    state = EmulatorState(
        token=token, log_path=log_path, flood=FloodLimits() if flood_limits else None
    )
    routes = _Routes(state)
    app = Starlette(
        lifespan=routes.lifespan,
        routes=[
            Route("/bot{token}/{method}", routes.api, methods=["GET", "POST"]),
            Route("/emulator/messages", routes.messages, methods=["GET"]),
            Route("/emulator/calls", routes.calls, methods=["GET"]),
            Route("/emulator/faults", routes.faults, methods=["GET", "POST"]),
            Route("/emulator/reset", routes.reset, methods=["POST"]),
        ],
    )
    return app, state


class _Routes:
    """The emulator's endpoints over one `EmulatorState`: the Bot API (`api`, which answers each
    method) and the control endpoints, plus the lifespan that closes the receipt file."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state

    async def api(self, request: Request) -> JSONResponse:
        """`/bot{token}/{method}`: the token, the body, an armed fault, then the method."""
        state = self.state
        if state.token is not None and request.path_params["token"] != state.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"].lower()
        state.calls[method] += 1
        try:
            params = await _params(request)
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(400, f"Bad Request: can't parse request body: {exc}")
        fault = state.take_fault(method)
        if fault is not None and fault.mode == "429":
            return _error(
                429,
                f"Too Many Requests: retry after {fault.retry_after_s}",
                retry_after=fault.retry_after_s,
            )
        if fault is not None and fault.mode == "5xx":
            return _error(fault.status, "Internal Server Error")
        if fault is not None and fault.mode in REFUSALS:
            return _error(*REFUSALS[fault.mode])
        answer = self._answer(method, params)
        if fault is not None and fault.mode == "delay":
            await _delay(request, fault.delay_s)
        return answer

    def _answer(self, method: str, params: dict[str, Any]) -> JSONResponse:
        if method == "getme":
            return _ok(BOT_USER)
        if method in {"close", "logout", "deletewebhook"}:
            return _ok(True)
        if method != "sendmessage":
            return _error(404, "Not Found: method not found")
        return self._send_message(params)

    def _send_message(self, params: dict[str, Any]) -> JSONResponse:
        """`sendMessage`: check it as the Bot API does, apply the flood limits, keep the message;
        its receipt line and log event are written after the answer is sent."""
        state = self.state
        if not str(params.get("chat_id", "")).strip():
            return _error(400, "Bad Request: chat_id is empty")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if len(text.encode("utf-16-le")) // 2 > MAX_MESSAGE_UTF16_UNITS:
            return _error(400, "Bad Request: message is too long")
        chat_id, chat = _chat(params["chat_id"])
        if state.flood is not None:
            retry_after = state.flood.admit(params["chat_id"])
            if retry_after is not None:
                state.too_many_requests += 1
                return _error(
                    429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after
                )
        silent = str(params.get("disable_notification", "")).lower() in {"true", "1"}
        record = state.keep(chat_id, text, disable_notification=silent)

        async def after_answer() -> None:
            state.write_log(record)
            log.info("emulator.message", message_id=record["message_id"], chat_id=chat_id)

        answer = _ok(
            {
                "message_id": record["message_id"],
                "from": BOT_USER,
                "chat": chat,
                "date": int(record["received_at"]),
                "text": text,
            }
        )
        answer.background = BackgroundTask(after_answer)
        return answer

    async def messages(self, _: Request) -> JSONResponse:
        return JSONResponse({"messages": self.state.messages})

    async def calls(self, _: Request) -> JSONResponse:
        return JSONResponse(
            {"calls": dict(self.state.calls), "too_many_requests": self.state.too_many_requests}
        )

    async def faults(self, request: Request) -> JSONResponse:
        state = self.state
        if request.method == "GET":
            return JSONResponse({"faults": [fault.as_dict() for fault in state.faults]})
        try:
            document = json.loads(await request.body())
            fault = parse_fault(document)
        except (ValueError, TypeError) as exc:
            return JSONResponse({"ok": False, "description": str(exc)}, status_code=400)
        if document.get("replace") is True:
            state.faults.clear()
        state.arm(fault)
        log.info("emulator.fault_armed", **fault.as_dict())
        return JSONResponse({"ok": True, "faults": [f.as_dict() for f in state.faults]})

    async def reset(self, _: Request) -> JSONResponse:
        self.state.reset()
        return JSONResponse({"ok": True})

    @asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.state.close_log()


def parse_fault(document: Any) -> Fault:
    """A `Fault` from the control endpoint's JSON, or ValueError saying what is wrong."""
    if not isinstance(document, dict):
        raise ValueError("a fault is a JSON object")
    mode = str(document.get("mode", ""))
    if mode not in FAULT_MODES:
        raise ValueError(f"mode must be one of {sorted(FAULT_MODES)}, got {mode!r}")
    count = int(document.get("count", 1))
    if not 1 <= count <= MAX_FAULT_COUNT:
        raise ValueError(f"count must be 1..{MAX_FAULT_COUNT}")
    status = int(document.get("status", 500))
    if not 500 <= status <= 599:
        raise ValueError("status must be a 5xx code")
    delay_s = float(document.get("delay_s", 0.0))
    if not 0 <= delay_s <= MAX_FAULT_DELAY_S:
        raise ValueError(f"delay_s must be 0..{MAX_FAULT_DELAY_S:g}")
    retry_after = int(document.get("retry_after", 1))
    if retry_after < 1:
        raise ValueError("retry_after must be at least 1 second")
    if not isinstance(document.get("replace", False), bool):
        raise ValueError("replace must be true or false")
    methods = document.get("methods", ["sendMessage"])
    if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
        raise ValueError("methods must be a list of Bot API method names")
    return Fault(
        mode=mode,
        remaining=count,
        methods=frozenset(m.lower() for m in methods),
        retry_after_s=retry_after,
        status=status,
        delay_s=delay_s,
    )


def main(argv: list[str] | None = None) -> int:
    """`chief telegram-emulator --port P [--host 127.0.0.1] [--log FILE.jsonl] [--token T]`."""
    from chief.args import OneLineParser, port_number
    from chief.logs import configure_logging
    from chief.loopback_http import is_loopback_host, run_server

    parser = OneLineParser(
        prog="chief telegram-emulator",
        description="A local Telegram Bot API emulator (loopback only) for tests and demos.",
    )
    parser.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help="0 picks a free port"
    )
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
    parser.add_argument("--log", type=Path, help="append every received message as JSON lines")
    parser.add_argument("--token", help="accept only this bot token (default: any)")
    parser.add_argument(
        "--flood-limits",
        action="store_true",
        help="answer 429 past Telegram's flood limits (1/s per chat, 20/min per group, 30/s)",
    )
    args = parser.checked(parser.parse_args(argv))
    configure_logging()
    if not is_loopback_host(args.host):
        print(
            f"chief telegram-emulator: --host {args.host} is not loopback; use 127.0.0.1 or ::1",
            file=sys.stderr,
        )
        return 2
    app, _ = create_emulator(token=args.token, log_path=args.log, flood_limits=args.flood_limits)
    started = run_server(app, host=args.host, port=args.port, event="emulator.listening")
    if not started:
        print(
            "chief telegram-emulator: the emulator did not start; see the log above",
            file=sys.stderr,
        )
        return 1
    return 0
