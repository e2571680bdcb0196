"""A door killed with its sendMessage on the wire: Telegram takes the message after the death.

The request left the door before the SIGKILL, but the emulator stamps a message when its
handler keeps it, and a busy emulator gets there later: here it is stopped (SIGSTOP) while the
request waits in its socket, and resumed only after the door is dead. The door never saw an
answer, so the send is in doubt (docs/architecture.md, "The in-doubt events", event 1): the
successor records it and repeats the row once, marked. The proof's measure from outside
(`window_deaths`) must count that death although the receipt is later than it: every bot message
stamped before the successor was spawned is the dead instance's.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from chief.phone.pacing import REPEAT_MARKER
from tests.e2e.proof.proof_checks import DoorDeath, settle, taken_after_death, window_deaths
from tests.e2e.proof.proof_stack import MakeStack
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.timeout(120)]

EVENT_WAIT_S = 30.0
SETTLE_S = 60.0
TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


def unread_bytes(port: int) -> int:
    """Bytes waiting, unread, in the receive queues of the sockets on local `port` (the
    kernel's tables: columns local_address, rem_address, st, tx_queue:rx_queue)."""
    waiting = 0
    for table in TCP_TABLES:
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                waiting += int(fields[4].split(":")[1], 16)
    return waiting


def test_a_send_taken_after_the_door_died_is_counted_in_doubt(make_stack: MakeStack) -> None:
    stack = make_stack()
    started_at = time.time()
    stack.start()
    emulator, door = stack.emulator, stack.door
    assert emulator.port is not None
    text = "late receipt: a row whose send Telegram takes after the door died"
    os.kill(emulator.pid, signal.SIGSTOP)
    try:
        pushed = stack.coop("notify", text)
        assert pushed.returncode == 0, pushed.stderr
        row = int(pushed.stdout.split("#")[1].split()[0])
        # The in-flight record is committed before the send; then the request is on the wire,
        # unread in the stopped emulator's socket.
        wait_until_sync(
            lambda: stack.sends_in_flight() > 0 and unread_bytes(emulator.port or 0) > 0,
            timeout_s=EVENT_WAIT_S,
            what="the door's sendMessage waiting unread in the emulator's socket",
        )
        died_at = time.time()
        door.kill()
    finally:
        os.kill(emulator.pid, signal.SIGCONT)
    wait_until_sync(
        lambda: any(m["text"] == text for m in stack.telegram_messages()),
        timeout_s=EVENT_WAIT_S,
        what="the emulator to take the dead door's message",
    )
    (first,) = [m for m in stack.telegram_messages() if m["text"] == text]
    assert float(first["received_at"]) > died_at  # taken after the death: the case at hand
    successor_at = time.time()
    door.start()
    settle(stack, {row}, timeout_s=SETTLE_S)
    assert [m["text"] for m in stack.telegram_messages()] == [text, REPEAT_MARKER + text]
    events, _ = stack.in_doubt_events()
    assert events == 1  # the door knew: it repeated the row once, marked
    deaths = [DoorDeath(started_at, died_at, successor_at)]
    assert taken_after_death(stack, deaths) == 1
    assert window_deaths(stack, deaths) == 1
    assert stack.stop() == {"engine": 0, "door": 0, "emulator": 0}
