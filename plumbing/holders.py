"""What a process holding a lock is, told from what it says about itself in /proc, and how a
person stops it: the advice a refusal gives (`coop restore` refused by a holder of the ledger).

    a one-shot drainer   its command line is `... -m notifier drain` or `coop-notifier drain`
                         (a `coop` command spawned it): it exits by itself; wait, or `kill PID`
    one of our units     its cgroup's last part is `coop-NAME.service` (ops/systemd's units):
                         `systemctl stop coop-NAME` (`--user` under a user's manager). Only
                         ours: a process started from a shell inside some other service (a CI
                         runner's) is in that service's cgroup too, and stopping it is no advice
    under `ops/run`      honcho (what `ops/run` runs) among its parents: stop `ops/run`
                         (Ctrl-C in its terminal)
    anything else        `kill PID`

Checked in that order: a drainer spawned from a unit's process is still a drainer. A pid that
cannot be read (gone, or /proc closed to this user) gets the plain advice.

Standard library only.
"""

from __future__ import annotations

import os

PROC = "/proc"
#: The names of the project's systemd units (ops/systemd) begin so.
UNIT_PREFIX = "coop-"
#: How far up the parents `under_ops_run` looks (honcho, its shell, the service).
MAX_PARENTS = 8


def stop_advice(pid: int, proc: str = PROC) -> str:
    """How to stop process `pid`, in words that fit what it is (see the module docstring)."""
    if is_drainer(pid, proc):
        return (
            f"it is a one-shot drainer a `coop` command spawned and exits by itself once the"
            f" door answers or its wait runs out: wait for it, or `kill {pid}`"
        )
    unit = systemd_unit(pid, proc)
    if unit is not None:
        name, user = unit
        return f"it runs as a systemd unit: `systemctl {'--user ' if user else ''}stop {name}`"
    if under_ops_run(pid, proc):
        return "it runs under `ops/run`: stop that (Ctrl-C in its terminal)"
    return f"stop it (`kill {pid}`)"


def advice(pid: str, proc: str = PROC) -> str:
    """`stop_advice` for a pid as a lock file holds it (text: "unknown" when unreadable)."""
    return stop_advice(int(pid), proc) if pid.isdigit() else "stop it"


def command_line(pid: int, proc: str = PROC) -> list[str]:
    """The process's arguments ([] when it cannot be read)."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def is_drainer(pid: int, proc: str = PROC) -> bool:
    """The process is a one-shot drainer (`python -m notifier drain`, `coop-notifier drain`)."""
    args = command_line(pid, proc)
    for at, arg in enumerate(args[:-1]):
        tool = os.path.basename(arg)
        if (tool == "coop-notifier" or (arg == "notifier" and at and args[at - 1] == "-m")) and (
            args[at + 1] == "drain"
        ):
            return True
    return False


def systemd_unit(pid: int, proc: str = PROC) -> tuple[str, bool] | None:
    """The project's systemd unit the process runs in, and whether a user's manager runs it;
    None when its cgroup names none of ours (a terminal's scope, another service, no systemd)."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup"), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        if controllers not in ("", "name=systemd"):  # cgroup v2's one line, or v1's systemd's
            continue
        parts = [part for part in path.split("/") if part]
        if parts and parts[-1].startswith(UNIT_PREFIX) and parts[-1].endswith(".service"):
            user = any(part.startswith("user@") for part in parts[:-1])
            return parts[-1].removesuffix(".service"), user
    return None


def parent(pid: int, proc: str = PROC) -> int | None:
    """The process's parent pid (None when it cannot be read)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def under_ops_run(pid: int, proc: str = PROC) -> bool:
    """honcho, which `ops/run` runs, is among the process's parents."""
    current: int | None = pid
    for _ in range(MAX_PARENTS):
        current = parent(current, proc) if current is not None else None
        if current is None or current <= 1:
            return False
        if any(os.path.basename(arg) == "honcho" for arg in command_line(current, proc)[:2]):
            return True
    return False
