"""`chief serve`'s entry (dispatched by `chief.cli`): its arguments, its settings and the serve
lock, all before the door's libraries load. FastAPI, python-telegram-bot and the door's modules
cost about half a second of CPU to import (`chief.serve`); a start refused for a setting or a
lock another door holds answers without them, and the tests that start doors to see them refused
pay for none of it."""

from __future__ import annotations

import sys

from chief.args import OneLineParser
from chief.config import ChiefConfig
from chief.door.config import DoorConfig
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
        from chief.serve import serve_locked  # the door's libraries, once it may run

        return serve_locked(door_config, chief_config)
    finally:
        lock.release()
