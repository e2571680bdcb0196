"""A minimal assistant that owns the owner's Master Chief conversation: run it instead of
`chief serve` and the whole pipeline reports into the conversation the owner chats in.

    . ops/dev-env                          # COOP_HOME, CHIEF_OWNER, the service key ...
    python examples/assistant_app.py       # instead of `chief serve`, on the door's socket
    curl -s --unix-socket "$COOP_HOME/door.sock" -X POST http://localhost/chat \\
         -H 'content-type: application/json' -d '{"text": "what happened today?"}'

It serves on the door's Unix socket (`COOP_DOOR_SOCKET`, default `<COOP_HOME>/door.sock`, bound
0600 in the private data folder as `chief serve` binds it): that is where the notifier and
`chief report` look, and only the owner's user can create it there.

What it shows, in the order a host application needs it:

1. Hold the serve lock (`<chief.db>.serve.lock`) for as long as the Chief is open. One process
   holds the Chief: `chief serve` refuses to start beside it, and `chief report` (cron lines)
   hands its line to this process instead of landing it itself.
2. Mount the notify door: `chief.serve.create_app` is the door as an ASGI app; mounted at
   `/`, behind the host's own routes, it keeps its paths (`/api/coop/engine/notify`, where the
   notifier posts; `/api/chief/report`, where `chief report` knocks) and its guard. Its lifespan
   (the Telegram sender, the Chief and its drainer) runs inside the host's.
3. Answer each chat message inside `async with chief.turn():` (the owner's message, the
   model's work, the reply). A Coop or cron report that arrives meanwhile is durable at once and
   lands after the reply, never between the two.

The "model" here is a stand-in that reads the conversation (reports included: they are part of
the history a real model would read) and answers after EXAMPLE_THINK_S seconds (default 0.2),
the time a real model call takes. With EXAMPLE_THINK_UNTIL set to a file path, the call ends as
soon as that file exists (at the latest after EXAMPLE_THINK_S): a test's hand on the model, so
it can hold a turn open exactly until its reports have arrived.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.door.config import DoorConfig
from chief.errors import ChiefError
from chief.loopback_http import Listener, run_servers
from chief.serve import create_app
from chief.serve_lock import ServeLock
from plumbing.logs import configure_logging
from plumbing.unix import bind_private

DEFAULT_THINK_S = 0.2
THINK_UNTIL_POLL_S = 0.02


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4000)


class ChatOut(BaseModel):
    reply: str
    user_message_id: int
    reply_message_id: int


async def model_call(think_s: float, until: str | None) -> None:
    """The stand-in model call: `think_s` seconds, or until the file `until` exists."""
    if until is None:
        await anyio.sleep(think_s)
        return
    # A file is the hand a test in another process can hold; the wait is bounded by think_s.
    with anyio.move_on_after(think_s):
        while not await anyio.Path(until).exists():  # noqa: ASYNC110 - no event crosses processes
            await anyio.sleep(THINK_UNTIL_POLL_S)


async def think(chief: Chief, text: str, think_s: float, until: str | None = None) -> str:
    """The stand-in model: what a real assistant would do with the history and the message."""
    await model_call(think_s, until)
    history = await chief.recent_messages(limit=20)
    reports = [message for message in history if message.turn_kind in ("coop", "cron")]
    if not reports:
        return f"You said {text!r}. No reports in the conversation yet."
    return f"You said {text!r}. The latest report: {reports[-1].content}"


def create_assistant(door_config: DoorConfig, chief_config: ChiefConfig) -> FastAPI:
    """The host application: its own chat route, with the door mounted behind it."""
    door = create_app(door_config, chief_config)
    think_s = float(os.environ.get("EXAMPLE_THINK_S", DEFAULT_THINK_S))
    think_until = os.environ.get("EXAMPLE_THINK_UNTIL") or None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # 1. the serve lock, then 2. the door's own lifespan (sender, Chief, drainer).
        with ServeLock(chief_config.db_path, holder="example assistant"):
            async with door.router.lifespan_context(door):
                yield

    app = FastAPI(title="example assistant", lifespan=lifespan)

    @app.post("/chat", response_model=ChatOut)
    async def chat(message: ChatIn) -> ChatOut:
        chief: Chief = door.state.door.chief
        # 3. One turn: the owner's message, the model's work and the reply, under the turn lock.
        async with chief.turn():
            user_id = await chief.append_message("user", message.text)
            reply = await think(chief, message.text, think_s, think_until)
            reply_id = await chief.append_message("assistant", reply)
        return ChatOut(reply=reply, user_message_id=user_id, reply_message_id=reply_id)

    app.mount("/", door)  # after the host's routes, so they match first
    return app


def main() -> int:
    """Run the example on the door's socket until Ctrl-C or SIGTERM."""
    configure_logging()
    try:
        chief_config = ChiefConfig.from_env()
        door_config = DoorConfig.from_env()
        if chief_config.owner is None:
            raise ChiefError("CHIEF_OWNER is not set — the assistant needs the owner's Chief")
    except ChiefError as exc:
        print(f"assistant_app: {exc}", file=sys.stderr)
        return 2
    path = str(door_config.socket_path)
    try:
        sock = bind_private(path)  # a live door or assistant there: refused, named
    except (OSError, ValueError) as exc:
        print(f"assistant_app: cannot serve on {path}: {exc}", file=sys.stderr)
        return 1
    try:
        app = create_assistant(door_config, chief_config)
        # The door's runner (chief.loopback_http): SIGTERM finishes requests in flight and
        # returns, and an `assistant.listening` event on stderr names the socket.
        started = run_servers([Listener(app, "assistant.listening", sockets=[sock])])
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if not started:
        print("assistant_app: did not start; see the log above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
