"""The whole stack with the owner's phone in it, as real processes: the Bot API emulator, the
door (`chief serve`, its phone long-polling the emulator) and the ledger service (`coop serve`),
over one data folder (tests.support.stack). The door reaches `coop serve` on its socket in that
folder (both default to `<COOP_HOME>/service.sock`), where it comes back after a restart. Used
by tests/e2e/phone/ and bench/bench_phone_taps.py.

    stack = make_stack(folder)
    start(stack, door_faults="door.answer_recorded")   # each part armed as asked
    owner = EmulatorOwner(stack.emulator.url)          # tests.support.phone
"""

from __future__ import annotations

from pathlib import Path

from tests.support.stack import Stack


def make_stack(folder: Path) -> Stack:
    """A stack whose door asks `coop serve` on its socket in `folder` (the default of both)."""
    return Stack(folder)


def start(stack: Stack, *, door_faults: str = "", engine_faults: str = "") -> None:
    """The emulator, the door (its poller running) and `coop serve`, armed as asked."""
    stack.emulator.start()
    stack.started.append(stack.emulator)
    stack.door.env["TELEGRAM_API_BASE"] = f"{stack.emulator.url}/bot"
    stack.door.start(faults=door_faults)
    stack.started.append(stack.door)
    stack.door.wait_event("door.phone_commands_registered", "the door's phone polling")
    stack.engine.start(faults=engine_faults)
    stack.started.append(stack.engine)
    stack.engine.wait_event("notifier.daemon.started")
