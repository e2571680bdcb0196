"""Idle connections lock nobody out (issue 26, item 4), on the real stack: the Telegram
emulator, the door (`chief serve`) and `coop serve` with its notifier daemon.

- With 250 connections that never send a request held on the door and 250 on the engine
  service, a notify reaches the Chief within 2 s, an owner-side call on the engine answers,
  and `coop status` reads the door.
- Those connections are closed by the servers within a few seconds; once every idle socket is
  gone, the next notify lands as fast and both servers hold no leftover connection.
"""

from __future__ import annotations

import json
import resource
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import direct, kick
from engine import store as engine_store
from engine.outbox import enqueue
from tests.support.procs import coop, fd_targets
from tests.support.raw_http import IdleSockets
from tests.support.stack import SERVICE_KEY, SERVICE_KEY_HEADER, Stack
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(120)

IDLE_PER_SERVICE = 250
LANDED_WITHIN_S = 2.0
# The servers close a connection that sent no complete request within a few seconds.
CLOSED_WITHIN_S = 15.0
WANTED_FDS = 4096


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < WANTED_FDS:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(WANTED_FDS, hard), hard))
    stack = Stack(tmp_path_factory.mktemp("idle"))
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _chief_lines(chief_db: Path) -> list[str]:
    if not chief_db.exists():
        return []
    with sqlite3.connect(f"file:{chief_db}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT content FROM messages ORDER BY id")]


def _notify_lands(stack: Stack, text: str, within_s: float) -> None:
    with direct.connection(stack.coop_db) as conn, engine_store.write(conn):
        enqueue(conn, "note", text)
    kick.send_datagram(stack.coop_db)
    wait_until_sync(
        lambda: any(text in line for line in _chief_lines(stack.chief_db)),
        timeout_s=within_s,
        what=f"{text!r} in the Chief",
    )


def _owner_call_answers(stack: Stack) -> None:
    answer = stack.engine.get(
        "/api/coop/phone/summary", headers={SERVICE_KEY_HEADER: SERVICE_KEY}, timeout=5.0
    )
    assert answer.status_code == 200, answer.text


def _coop_status_reads_the_door(stack: Stack) -> None:
    done = coop("status", "--json", env=stack.env(), inherit=False)
    door = json.loads(done.stdout)["door"]
    assert door.get("answered") is True, door


def _socket_fds(pid: int) -> int:
    return sum(target.startswith("socket:") for target in fd_targets(pid))


def test_idle_connections_on_both_services_lock_nobody_out(stack: Stack) -> None:
    assert stack.door.socket_path
    assert stack.engine.socket_path
    _notify_lands(stack, "before the flood", within_s=10.0)
    baseline = {part.name: _socket_fds(part.pid) for part in (stack.door, stack.engine)}
    with (
        IdleSockets(stack.door.socket_path, IDLE_PER_SERVICE) as door_idle,
        IdleSockets(stack.engine.socket_path, IDLE_PER_SERVICE) as engine_idle,
    ):
        _notify_lands(stack, "during the flood", within_s=LANDED_WITHIN_S)
        _owner_call_answers(stack)
        _coop_status_reads_the_door(stack)
        for idle in (door_idle, engine_idle):
            wait_until_sync(
                lambda idle=idle: idle.closed_by_server() == idle.count,
                timeout_s=CLOSED_WITHIN_S,
                what="the server to close every idle connection",
            )
    _notify_lands(stack, "after the flood", within_s=LANDED_WITHIN_S)
    for part in (stack.door, stack.engine):
        wait_until_sync(
            lambda part=part: _socket_fds(part.pid) <= baseline[part.name] + 2,
            timeout_s=CLOSED_WITHIN_S,
            what=f"{part.name} to hold no leftover connection",
        )
