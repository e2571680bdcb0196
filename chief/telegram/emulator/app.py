"""The emulator's ASGI app (`create_emulator`) and its process (`main`): the Bot API endpoint,
the control endpoints, and the receipt file closed at shutdown. See the package docstring."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import anyio
import structlog
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chief.telegram.emulator import owner, raw, replies
from chief.telegram.emulator.guard import EmulatorGuard
from chief.telegram.emulator.methods import BotMethods
from chief.telegram.emulator.shapes import Refusal
from chief.telegram.emulator.state import REFUSALS, EmulatorState, FloodLimits, parse_fault
from plumbing.refusals import RefusalTally

log = structlog.get_logger("chief.telegram.emulator")

DEFAULT_PORT = 8081


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
    controls = _Controls(state)
    app = Starlette(
        lifespan=routes.lifespan,
        routes=[
            Route("/bot{token}/{method}", routes.api, methods=["GET", "POST"]),
            Route("/emulator/messages", controls.messages, methods=["GET"]),
            Route("/emulator/calls", controls.calls, methods=["GET"]),
            Route("/emulator/faults", controls.faults, methods=["GET", "POST"]),
            Route("/emulator/replies", controls.replies, methods=["GET", "POST"]),
            Route("/emulator/reset", controls.reset, methods=["POST"]),
            Route("/emulator/chats/migrate", controls.migrate, methods=["POST"]),
            Route("/emulator/owner/text", controls.owner_text, methods=["POST"]),
            Route("/emulator/owner/press", controls.owner_press, methods=["POST"]),
            Route("/emulator/owner/replay", controls.owner_replay, methods=["POST"]),
            Route("/emulator/owner/raw", controls.owner_raw, methods=["POST"]),
            Route("/emulator/owner/block", controls.owner_block, methods=["POST"]),
            Route("/emulator/callback_answers", controls.callback_answers, methods=["GET"]),
            Route("/emulator/commands", controls.commands, methods=["GET"]),
            Route("/emulator/updates", controls.updates, methods=["GET"]),
            Route("/emulator/updates/next_id", controls.next_update_id, methods=["POST"]),
        ],
    )
    # Guarded like the door (`guard`): no browser page drives or reads it through loopback.
    app.add_middleware(EmulatorGuard, tally=routes.refusals)
    return app, state


class _Routes:
    """The Bot API endpoint over one `EmulatorState` (`api`: the token, the body, an armed
    fault, then the method), plus the lifespan that closes the receipt file."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.methods = BotMethods(state)
        #: the guard's refusals, counted; the ones not yet said get their line at the stop
        self.refusals = RefusalTally()

    async def api(self, request: Request) -> Response:
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
        shape = state.reply_shapes.take(method)
        if shape is not None:
            return await self._shaped(method, params, request, shape)
        answer = await self._answer(method, params, request)
        if fault is not None and fault.mode == "delay":
            await _delay(request, fault.delay_s)
        return answer

    async def _answer(self, method: str, params: dict[str, Any], request: Request) -> JSONResponse:
        handler = self.methods.table.get(method)
        if handler is None:
            return _error(404, "Not Found: method not found")
        try:
            result = await handler(params, request)
        except Refusal as exc:
            return _error(exc.status, exc.description, **exc.parameters)
        answer = _ok(result)
        if method == "sendmessage":
            answer.background = BackgroundTask(self._after_send, self.state.messages[-1])
        return answer

    async def _shaped(
        self, method: str, params: dict[str, Any], request: Request, shape: str
    ) -> Response:
        """The method run (a getUpdates never: it answers nothing, at once), then its answer
        replaced by an unreadable `shape` (`replies`)."""
        result: Any = []
        if method != "getupdates":
            answer = await self._answer(method, params, request)
            if answer.status_code != 200:
                return answer  # refused: Telegram's own refusal, readable
            result = json.loads(bytes(answer.body))["result"]
        shaped = replies.render(shape, result)
        if method == "sendmessage":
            shaped.background = BackgroundTask(self._after_send, self.state.messages[-1])
        log.info("emulator.reply_shaped", method=method, shape=shape)
        return shaped

    async def _after_send(self, record: dict[str, Any]) -> None:
        """The receipt line and log event of a kept message, written after its answer went
        out, so the sender does not wait for them."""
        self.state.write_log(record)
        log.info(
            "emulator.message",
            telegram_message_id=record["message_id"],
            chat_id=record["chat_id"],
        )

    @asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.state.close_log()
            for summary in self.refusals.flush():
                log.warning("emulator.refused", **summary.fields())


async def _document(request: Request) -> dict[str, Any]:
    """A control endpoint's JSON object, or ValueError."""
    try:
        document = json.loads(await request.body())
    except ValueError as exc:
        raise ValueError("the body must be a JSON object") from exc
    if not isinstance(document, dict):
        raise ValueError("the body must be a JSON object")
    return document


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refused(reason: str) -> JSONResponse:
    return JSONResponse({"ok": False, "description": reason}, status_code=400)


class _Controls:
    """The control endpoints, for tests and demos (see the package docstring)."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state

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

    async def replies(self, request: Request) -> JSONResponse:
        shapes = self.state.reply_shapes
        if request.method == "POST":
            try:
                document = await _document(request)
                if document.get("clear") is True:
                    shapes.clear()
                else:
                    log.info("emulator.reply_shape_armed", **shapes.arm(document).as_dict())
            except ValueError as exc:
                return _refused(str(exc))
        return JSONResponse({"ok": True, "replies": [a.as_dict() for a in shapes.armed]})

    async def migrate(self, request: Request) -> JSONResponse:
        """`{"chat_id", "to_chat_id"?}`: the group becomes a supergroup (`state.migrate`)."""
        try:
            document = await _document(request)
            chat_id, to_chat_id = document.get("chat_id"), document.get("to_chat_id")
            if not isinstance(chat_id, int) or not _whole(chat_id):
                raise ValueError("chat_id must be an integer")
            if to_chat_id is not None and (
                not isinstance(to_chat_id, int) or not _whole(to_chat_id)
            ):
                raise ValueError("to_chat_id must be an integer")
            new = self.state.migrate(chat_id, to_chat_id)
        except ValueError as exc:
            return _refused(str(exc))
        log.info("emulator.chat_migrated", chat_id=chat_id, to_chat_id=new)
        return JSONResponse({"ok": True, "chat_id": chat_id, "to_chat_id": new})

    async def reset(self, _: Request) -> JSONResponse:
        self.state.reset()
        return JSONResponse({"ok": True})

    async def owner_text(self, request: Request) -> JSONResponse:
        return await self._play(request, owner.text)

    async def owner_press(self, request: Request) -> JSONResponse:
        return await self._play(request, owner.press)

    async def owner_replay(self, request: Request) -> JSONResponse:
        return await self._play(request, owner.replay)

    async def owner_block(self, request: Request) -> JSONResponse:
        return await self._play(request, owner.block)

    async def owner_raw(self, request: Request) -> JSONResponse:
        return await self._play(request, raw.raw)

    async def _play(self, request: Request, act: Any) -> JSONResponse:
        try:
            return JSONResponse(act(self.state, await _document(request)))
        except ValueError as exc:
            return _refused(str(exc))

    async def callback_answers(self, _: Request) -> JSONResponse:
        return JSONResponse({"callback_answers": self.state.callback_answers})

    async def commands(self, _: Request) -> JSONResponse:
        return JSONResponse({"commands": self.state.commands})

    async def updates(self, _: Request) -> JSONResponse:
        queue = self.state.updates
        return JSONResponse(
            {"pending": queue.pending_ids(), "polling": queue.polling, "next_id": queue.next_id}
        )

    async def next_update_id(self, request: Request) -> JSONResponse:
        return await self._play(request, _restart_ids)


def _restart_ids(state: EmulatorState, document: dict[str, Any]) -> dict[str, Any]:
    """`{"next_update_id": N}`: the next update is numbered N (ids may go down, as Telegram's
    do after a week without updates); the id the next update would have had."""
    next_id = document.get("next_update_id")
    if isinstance(next_id, bool) or not isinstance(next_id, int):
        raise ValueError("next_update_id must be an integer")
    was = state.updates.next_id
    state.updates.restart_ids(next_id)
    log.info("emulator.update_ids_restarted", next_update_id=next_id, was=was)
    return {"next_update_id": next_id, "was": was}


PROG = "chief telegram-emulator"
#: What to do about a port the emulator cannot take (`ops/run` passes COOP_EMULATOR_PORT).
PORT_ADVICE = "choose a free --port, 0 for any (ops/run passes COOP_EMULATOR_PORT)"


def main(argv: list[str] | None = None) -> int:
    """`chief telegram-emulator --port P [--host 127.0.0.1] [--log FILE.jsonl] [--token T]`."""
    from chief.args import OneLineParser, port_number
    from chief.loopback_http import Listener, is_loopback_host, run_servers
    from plumbing.listening import CannotListen, bind_tcp, reason
    from plumbing.logs import configure_logging
    from plumbing.terminal import shown

    parser = OneLineParser(
        prog=PROG,
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
            f"{PROG}: --host {args.host} is not loopback; use 127.0.0.1 or ::1",
            file=sys.stderr,
        )
        return 2
    app, state = create_emulator(
        token=args.token, log_path=args.log, flood_limits=args.flood_limits
    )
    # The port and the log file taken before the first line: a start failure is one line
    # (`plumbing.listening`'s shape), never uvicorn's `[Errno 98]` after a start.
    try:
        if args.log is not None:
            state.open_log()
        sock = bind_tcp(args.host, args.port, "--port", PORT_ADVICE)
    except CannotListen as exc:
        print(shown(f"{PROG}: {exc.message}"), file=sys.stderr)
        return 1
    except OSError as exc:
        print(shown(f"{PROG}: cannot write --log {args.log}: {reason(exc)}"), file=sys.stderr)
        return 1
    try:
        started = run_servers([Listener(app, "emulator.listening", sockets=[sock])])
    finally:
        sock.close()
        state.close_log()
    if not started:
        print(f"{PROG}: the emulator did not start; see the log above", file=sys.stderr)
        return 1
    return 0
