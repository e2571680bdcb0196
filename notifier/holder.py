"""Who a worker is, and whether the holder of the worker lock is provably gone.

A worker is identified by a fresh owner id, its pid, its host and its process start time. A lock
row may be taken over only when its holder is *provably* gone:

- same host, and that pid is not running (or is a zombie: killed, not yet reaped), or
- same host, and that pid now belongs to a different process (its start time differs from the
  one the lock recorded: the pid was reused).

A lock held from another host, or by a live process, is never taken over, however old it is:
a timer never decides that a holder is dead.

Process start times come from Linux's /proc (boot time + the process's start in clock ticks),
as epoch seconds; computed by the same formula every time, so equal processes compare equal.
Where /proc is missing, the start time is None and only the pid check applies.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Start times come from the same formula on both sides; the tolerance only absorbs float noise.
START_TIME_TOLERANCE_S = 0.001


@dataclass(frozen=True)
class Holder:
    """One worker's identity, as written to the `worker_lock` row."""

    owner: str
    pid: int
    host: str
    started_at: float | None

    def describe(self) -> str:
        return f"{self.owner} (pid {self.pid} on {self.host})"


def this_worker(role: str) -> Holder:
    """A fresh identity for a worker in this process (`role`: drain, daemon)."""
    pid = os.getpid()
    host = socket.gethostname()
    return Holder(
        owner=f"{role}-{host}-{pid}-{uuid.uuid4().hex[:8]}",
        pid=pid,
        host=host,
        started_at=process_start_time(pid),
    )


def process_start_time(pid: int) -> float | None:
    """When `pid` started, in epoch seconds, or None when unknown (no /proc, no such pid)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        boot = _boot_time()
    except (OSError, ValueError):
        return None
    if boot is None:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    start_ticks = int(fields[19])  # field 22 overall; fields[0] is field 3
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


def _boot_time() -> float | None:
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def _is_zombie(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].startswith("Z")


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists (on this host) and is not a zombie."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return not _is_zombie(pid)


def why_gone(holder: Holder, me: Holder) -> str | None:
    """Why `holder` is provably gone, or None when it may still be alive."""
    if holder.host != me.host:
        return None
    if holder.pid == me.pid and holder.started_at == me.started_at:
        return None  # this very process: alive by definition
    if not pid_alive(holder.pid):
        return f"pid {holder.pid} is not running"
    if holder.started_at is not None:
        now_started = process_start_time(holder.pid)
        if (
            now_started is not None
            and abs(now_started - holder.started_at) > START_TIME_TOLERANCE_S
        ):
            return (
                f"pid {holder.pid} is now a different process"
                f" (started at {now_started:.2f}, the lock says {holder.started_at:.2f})"
            )
    return None
