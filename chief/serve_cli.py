"""`chief serve`'s entry (dispatched by `chief.cli`): its arguments, its settings, the serve
lock, its sockets and chief.db, all before the door's libraries load. FastAPI,
python-telegram-bot and the door's modules cost about half a second of CPU to import
(`chief.serve`); a start refused for a setting, a lock another door holds, a socket or port it
cannot take, or a chief.db it cannot open answers without them, and the tests that start doors
to see them refused pay for none of it."""

from __future__ import annotations

import contextlib
import os
import sys

import anyio

from chief.args import OneLineParser
from chief.config import ChiefConfig
from chief.door.config import METRICS_HOST, DoorConfig
from chief.errors import ChiefError
from chief.serve_lock import ServeLock
from plumbing.terminal import shown


def main(argv: list[str] | None = None) -> int:
    """`chief serve`: run the door on its Unix socket (and `/metrics` on TCP) until SIGTERM."""
    from plumbing.logs import configure_logging

    parser = OneLineParser(
        prog="chief serve",
        description="Run the Coop notify door on its Unix socket (COOP_DOOR_SOCKET; /metrics "
        "alone on 127.0.0.1:CHIEF_METRICS_PORT).",
    )
    parser.checked(parser.parse_args(argv))
    configure_logging()
    try:
        chief_config = ChiefConfig.from_env()
        door_config = DoorConfig.from_env()
    except ChiefError as exc:
        print(shown(f"chief serve: {exc}"), file=sys.stderr)
        return 2
    lock = ServeLock(chief_config.db_path)
    try:
        lock.acquire()
    except ChiefError as exc:
        print(shown(f"chief serve: {exc}"), file=sys.stderr)
        return 1
    try:
        return _serve_locked(door_config, chief_config)
    finally:
        lock.release()


def _serve_locked(door_config: DoorConfig, chief_config: ChiefConfig) -> int:
    """Bind the door's sockets under the serve lock, open chief.db once, serve, and remove the
    Unix socket after. A socket or a port it cannot take (`plumbing.listening`'s shape) or a
    chief.db it cannot open is one line."""
    from plumbing import door as door_address
    from plumbing.listening import CannotListen, bind_socket, bind_tcp

    path = str(door_config.socket_path)
    sockets = []
    try:
        try:
            sockets.append(bind_socket(path, door_address.SOCKET_SETTING))
            if door_config.metrics_port is not None:
                advice = "set CHIEF_METRICS_PORT to a free port, 0 for any, or off"
                sockets.append(
                    bind_tcp(METRICS_HOST, door_config.metrics_port, "CHIEF_METRICS_PORT", advice)
                )
        except CannotListen as exc:
            print(shown(f"chief serve: {exc.message}"), file=sys.stderr)
            return 1
        if chief_config.owner is not None:  # the door opens the Chief only for an owner
            try:
                anyio.run(_open_chief, chief_config)
            except ChiefError as exc:
                print(shown(f"chief serve: {exc}"), file=sys.stderr)
                return 1
        from chief.serve import serve_bound  # the door's libraries, once it may run

        return serve_bound(door_config, chief_config, sockets)
    finally:
        for sock in sockets:
            sock.close()
        # Still under the serve lock: no other door of this chief.db has bound it since.
        if sockets:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


async def _open_chief(chief_config: ChiefConfig) -> None:
    """Open and migrate chief.db once, as the door's lifespan will: an unusable one is one line
    before the door's libraries load."""
    from chief.store import ChiefStore

    async with ChiefStore.open(chief_config.db_path):
        pass
