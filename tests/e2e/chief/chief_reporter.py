"""A real process that reports one line to the Master Chief, for the crash tests.

    python -m tests.e2e.chief.chief_reporter SOURCE_ID TEXT [--hold-turn]

Reads CHIEF_DB / CHIEF_OWNER like the door does. With --hold-turn it holds the Chief's turn lock
while reporting (wait=0), so the row is committed but cannot land, then waits to be killed.
"""

from __future__ import annotations

import sys

import anyio

from chief.config import ChiefConfig
from chief.conversation import Chief
from plumbing.logs import configure_logging


async def run(source_id: str, text: str, hold_turn: bool) -> None:
    async with Chief.open(ChiefConfig.from_env()) as chief:
        if not hold_turn:
            await chief.report(text, source_id, wait=None)
            return
        async with chief.turn():
            await chief.report(text, source_id, wait=0.0)
            await anyio.sleep_forever()  # the test SIGKILLs us here


def main(argv: list[str]) -> int:
    configure_logging(json=True)
    anyio.run(run, argv[0], argv[1], "--hold-turn" in argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
