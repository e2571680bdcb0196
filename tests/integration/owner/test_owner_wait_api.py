"""`engine.ledger.wait_request` routed to a real owner app after a real cutover: each look is a
routed read, a whole-number timeout fits the verb's `float`, and the owner's commit of a close
(a routed call) wakes the waiter through the owner's own `after_commit`."""

from __future__ import annotations

import os
import threading

import pytest

from engine import kick, ledger
from engine.errors import NotFound, TimedOut
from tests.integration.owner.conftest import RunningOwner
from tests.support.waiting import wait_until_sync


def test_a_routed_wait_looks_at_the_owner_and_is_woken_by_its_commit(
    running: RunningOwner,
) -> None:
    ledger.add_request("r", actor="agent")
    with pytest.raises(TimedOut, match=r"request #1 still open after 0 s"):
        ledger.wait_request(1, timeout_s=0)
    with pytest.raises(NotFound):
        ledger.wait_request(9, timeout_s=5)

    folder = kick.waiters_folder(running.db)
    closed = threading.Event()

    def close_once_bound() -> None:
        wait_until_sync(lambda: _bound(folder), what="the waiter's socket")
        ledger.close_request(1, actor="owner", result_summary="routed")
        closed.set()

    closer = threading.Thread(target=close_once_bound)
    closer.start()
    try:
        answer = ledger.wait_request(1, timeout_s=30)
    finally:
        closer.join(timeout=30)
    assert closed.is_set()
    assert answer["request"]["result_summary"] == "routed"
    assert ledger.wait_request(1, timeout_s=5)["request"]["status"] == "closed"
    assert running.kicks  # the close queued a row: the daemon's kick came first


def _bound(folder: str) -> bool:
    return os.path.isdir(folder) and bool(os.listdir(folder))
