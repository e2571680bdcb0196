"""The daemon in-process: resume at start, wake on a kick (datagram or in-process), stop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from structlog.testing import capture_logs

from engine import kick
from notifier.daemon import Daemon
from notifier.errors import DaemonAlreadyRunning
from tests.integration.notifier.notifier_helpers import add_rows, lock_row, make_config, states
from tests.support.loopback_door import TestDoor, bound_socket, serve_door
from tests.support.waiting import wait_until

# Far beyond every wait below: a row delivered within them was woken, not found by the backstop.
BACKSTOP_S = 600.0


@asynccontextmanager
async def running_daemon(db_path: Path, door: TestDoor) -> AsyncIterator[Daemon]:
    with bound_socket(db_path.parent / "door.sock") as sock:
        async with serve_door(door, sock) as socket_path:
            daemon = Daemon(make_config(db_path, socket_path, backstop_s=BACKSTOP_S))
            async with anyio.create_task_group() as tg:
                tg.start_soon(daemon.run)
                await wait_until(daemon.socket_path.exists, what="the kick socket")
                await wait_until(lambda: lock_row(db_path) is None, what="the first drain")
                yield daemon
                daemon.stop()


def _all_delivered(db_path: Path, count: int) -> bool:
    found = states(db_path)
    return len(found) == count and set(found.values()) == {"delivered"}


async def test_the_daemon_resumes_pending_rows_at_start(db_path: Path) -> None:
    door = TestDoor()
    ids = add_rows(db_path, 20)
    async with running_daemon(db_path, door):
        await wait_until(lambda: _all_delivered(db_path, 20), what="resumed rows delivered")
    assert door.ids(db_path) == ids


async def test_a_datagram_kick_wakes_the_daemon_for_a_fresh_row(db_path: Path) -> None:
    door = TestDoor()
    async with running_daemon(db_path, door):
        ids = add_rows(db_path, 1)
        assert kick.kick(db_path, mode="datagram") == "datagram"
        await wait_until(lambda: _all_delivered(db_path, 1), what="kicked row delivered")
        more = add_rows(db_path, 3)
        assert kick.kick(db_path, mode="datagram") == "datagram"
        await wait_until(lambda: _all_delivered(db_path, 4), what="second burst delivered")
    assert door.ids(db_path) == ids + more


async def test_an_in_process_kick_wakes_the_daemon(db_path: Path) -> None:
    door = TestDoor()
    async with running_daemon(db_path, door) as daemon:
        ids = add_rows(db_path, 2)
        daemon.kick()
        await wait_until(lambda: _all_delivered(db_path, 2), what="kicked rows delivered")
    assert door.ids(db_path) == ids


async def test_stop_ends_run_and_leaves_no_lock_and_no_socket(db_path: Path) -> None:
    door = TestDoor()
    with capture_logs() as logs:
        async with running_daemon(db_path, door) as daemon:
            socket_path = daemon.socket_path
    assert not socket_path.exists()
    assert lock_row(db_path) is None
    assert [e["event"] for e in logs][-1] == "notifier.daemon.stopped"


async def test_a_second_daemon_on_the_same_store_refuses_to_start(db_path: Path) -> None:
    door = TestDoor()
    async with running_daemon(db_path, door):
        second = Daemon(make_config(db_path))
        with pytest.raises(
            DaemonAlreadyRunning, match=r"another notifier daemon \(pid \d+\) already runs"
        ):
            await second.run()


async def test_two_daemons_started_at_the_same_instant_leave_exactly_one_running(
    db_path: Path,
) -> None:
    # Both start in the same event loop tick: a look at the kick socket followed by a bind
    # lets both through; only an atomic claim refuses one.
    config = make_config(db_path, backstop_s=BACKSTOP_S)
    daemons = [Daemon(config), Daemon(config)]
    refused: list[DaemonAlreadyRunning] = []

    async def run(daemon: Daemon) -> None:
        try:
            await daemon.run()
        except DaemonAlreadyRunning as exc:
            refused.append(exc)

    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            for daemon in daemons:
                tg.start_soon(run, daemon)
            await wait_until(
                lambda: (
                    len(refused) + sum(e["event"] == "notifier.daemon.started" for e in logs) == 2
                ),
                what="both daemons settled",
            )
            started = sum(e["event"] == "notifier.daemon.started" for e in logs)
            for daemon in daemons:
                daemon.stop()
    assert (started, len(refused)) == (1, 1)
