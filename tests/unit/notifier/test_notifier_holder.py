"""Whether a lock holder is provably gone: never by age, only by pid and process start time."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from notifier.holder import Holder, pid_alive, process_start_time, this_worker, why_gone
from tests.support.waiting import wait_until_sync


def _holder_for(pid: int, started_at: float | None, host: str | None = None) -> Holder:
    me = this_worker("test")
    return Holder(owner="other", pid=pid, host=host or me.host, started_at=started_at)


def test_this_process_is_alive_and_has_a_stable_start_time() -> None:
    me = this_worker("test")
    assert me.pid == os.getpid()
    assert pid_alive(me.pid)
    assert process_start_time(me.pid) == process_start_time(me.pid) == me.started_at
    assert why_gone(replace(me, owner="earlier-worker-here"), me) is None


def test_a_reaped_process_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    reason = why_gone(_holder_for(proc.pid, None), this_worker("test"))
    assert reason == f"pid {proc.pid} is not running"


def test_a_killed_but_unreaped_zombie_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        # Not reaped yet: the pid exists as a zombie, which holds nothing.
        wait_until_sync(lambda: not pid_alive(proc.pid), what="the child to exit")
        assert why_gone(_holder_for(proc.pid, None), this_worker("test")) is not None
    finally:
        proc.wait(timeout=10)


def test_a_holder_on_another_host_is_never_provably_gone() -> None:
    assert why_gone(_holder_for(999_999_999, None, host="elsewhere"), this_worker("t")) is None


def test_a_live_pid_with_another_start_time_is_a_different_process() -> None:
    parent = os.getppid()
    started = process_start_time(parent)
    assert started is not None
    assert why_gone(_holder_for(parent, started), this_worker("t")) is None
    reason = why_gone(_holder_for(parent, started - 100), this_worker("t"))
    assert reason is not None
    assert "is now a different process" in reason
