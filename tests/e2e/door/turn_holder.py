"""A host application for the tests: the real door app on uvicorn, on the door's socket
(`COOP_DOOR_SOCKET`, bound as `chief serve` binds it, where `chief report` looks), holding the
Chief (and the serve lock, as every holder must), plus one chat turn held and released on
command.

stdin lines: `hold` (take the turn lock, write the owner's message), `release` (write the reply,
let the turn go), `quit`. stdout lines: `listening <socket path>`, `held`, `released`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import uvicorn

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from chief.serve_lock import ServeLock
from plumbing.logs import configure_logging
from plumbing.unix import bind_private

USER_TEXT = "owner: did the backup run?"
REPLY_TEXT = "assistant: checking the backup log now"


def say(line: str) -> None:
    print(line, flush=True)


async def main() -> None:
    chief_config = ChiefConfig.from_env()
    door_config = DoorConfig.from_env()
    app = create_app(door_config, chief_config)
    config = uvicorn.Config(app, log_config=None, lifespan="on")
    server = uvicorn.Server(config)
    path = str(door_config.socket_path)
    sock = bind_private(path)
    release = anyio.Event()

    async def hold_turn() -> None:
        chief = app.state.door.chief
        async with chief.turn():
            await chief.append_message("user", USER_TEXT)
            say("held")
            await release.wait()
            await chief.append_message("assistant", REPLY_TEXT)
        say("released")

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.01)
            say(f"listening {path}")
            await _commands(server, tasks, hold_turn, release)
    finally:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


async def _commands(
    server: uvicorn.Server,
    tasks: anyio.abc.TaskGroup,
    hold_turn: Callable[[], Awaitable[None]],
    release: anyio.Event,
) -> None:
    """Obey stdin's lines until `quit` (or its end)."""
    while True:
        line = (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()
        if line == "hold":
            tasks.start_soon(hold_turn)
        elif line == "release":
            release.set()
        else:
            server.should_exit = True
            return


if __name__ == "__main__":
    configure_logging()  # on stderr: stdout carries the protocol above
    with ServeLock(ChiefConfig.from_env().db_path, holder="test host"):
        anyio.run(main)
