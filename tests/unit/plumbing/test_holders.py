"""plumbing.holders: the advice for a lock's holder fits what the process says it is. A systemd
unit cannot be started on this machine, so its case reads a /proc tree written as systemd's
would be (cgroup v2, v1's `name=systemd` line, a user's manager, a unit not ours); the real
processes' cases (a spawned drainer, a process under `ops/run`'s honcho, a plain one) are
tests/integration/ops/test_restore_advice.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumbing.holders import stop_advice

PID = 4242


def proc_tree(root: Path, cgroup: str, cmdline: tuple[str, ...] = ("/usr/bin/python3",)) -> str:
    """A /proc holding process PID with `cgroup` and `cmdline` (its parent init)."""
    folder = root / str(PID)
    folder.mkdir(parents=True)
    (folder / "cgroup").write_text(cgroup)
    (folder / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in cmdline) + b"\0")
    (folder / "stat").write_text(f"{PID} (python3) S 1 {PID} {PID} 0 -1")
    return str(root)


@pytest.mark.parametrize(
    ("cgroup", "advice"),
    [
        ("0::/system.slice/coop-engine.service\n", "`systemctl stop coop-engine`"),
        (
            "9:name=systemd:/system.slice/coop-chief-door.service\n0::/\n",
            "`systemctl stop coop-chief-door`",
        ),
        (
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/coop-engine.service\n",
            "`systemctl --user stop coop-engine`",
        ),
    ],
)
def test_a_process_of_one_of_our_units_is_stopped_by_systemctl(
    tmp_path: Path, cgroup: str, advice: str
) -> None:
    assert stop_advice(PID, proc_tree(tmp_path, cgroup)) == f"it runs as a systemd unit: {advice}"


@pytest.mark.parametrize(
    "cgroup",
    [
        "0::/system.slice/actions.runner.coop.service\n",  # a CI runner's shell: not our unit
        "0::/user.slice/user-1000.slice/session-3.scope\n",  # a terminal
        "4:memory:/system.slice/coop-engine.service\n0::/\n",  # a controller's line, not systemd's
        "0::/\n",
    ],
)
def test_any_other_process_is_told_by_its_pid(tmp_path: Path, cgroup: str) -> None:
    assert stop_advice(PID, proc_tree(tmp_path, cgroup)) == f"stop it (`kill {PID}`)"


def test_a_drainer_inside_a_unit_is_still_a_drainer(tmp_path: Path) -> None:
    root = proc_tree(
        tmp_path,
        "0::/system.slice/coop-engine.service\n",
        ("/usr/bin/python3", "-P", "-m", "notifier", "drain"),
    )
    assert stop_advice(PID, root).startswith("it is a one-shot drainer")


def test_a_pid_that_cannot_be_read_gets_the_plain_advice(tmp_path: Path) -> None:
    assert stop_advice(PID, str(tmp_path)) == f"stop it (`kill {PID}`)"
