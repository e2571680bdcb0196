"""A host application for the tests: the real door app on uvicorn, holding the Chief (and the
serve lock, as every holder must), plus one chat turn held and released on command.

stdin lines: `hold` (take the turn lock, write the owner's message), `release` (write the reply,
let the turn go), `quit`. stdout lines: `listening <port>`, `held`, `released`.
"""

from __future__ import annotations

import sys

import anyio
import uvicorn

from chief.config import ChiefConfig
from chief.door.app import create_app
from chief.door.config import DoorConfig
from chief.serve_lock import ServeLock
from plumbing.logs import configure_logging

USER_TEXT = "owner: did the backup run?"
REPLY_TEXT = "assistant: checking the backup log now"


def say(line: str) -> None:
    print(line, flush=True)


async def main() -> None:
    chief_config = ChiefConfig.from_env()
    door_config = DoorConfig.from_env()
    app = create_app(door_config, chief_config)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=door_config.port, log_config=None, lifespan="on"
    )
    server = uvicorn.Server(config)
    release = anyio.Event()

    async def hold_turn() -> None:
        chief = app.state.door.chief
        async with chief.turn():
            await chief.append_message("user", USER_TEXT)
            say("held")
            await release.wait()
            await chief.append_message("assistant", REPLY_TEXT)
        say("released")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.01)
        say(f"listening {server.servers[0].sockets[0].getsockname()[1]}")
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
