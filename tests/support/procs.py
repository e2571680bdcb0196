"""Running the project's own commands as real processes, from the same interpreter and venv."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PROCESS_TIMEOUT_S = 60.0


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment for a child, with the repository importable."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def run_module(
    module: str,
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """`python -m module args...`, waited for, output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def coop(
    *args: str, env: Mapping[str, str] | None = None, timeout_s: float = PROCESS_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """The `coop` CLI as a real process."""
    return run_module("engine", args, env=env, timeout_s=timeout_s)
