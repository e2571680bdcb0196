"""Every bench script runs once, at a tiny size, so none can rot unnoticed.

A smoke run asserts only that the script finishes, exit status 0, within its bound: bench figures
are printed, never asserted (tests never time things). Each script runs in its own process group,
so a script that overruns its bound is killed together with the stack it started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.procs import child_env

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# script -> the arguments of its smoke run: the smallest sizes that still run every phase. An
# idle bench's settling pause (`--settle-s`, 3 s) is 0 and its window 0.2 s: a smoke run reads
# no figure, so nothing needs to settle or add up. One quiet row, ask or tap where more would
# wait out pacing (the door rings about one a second, the quiet producer at most one a second).
SMOKE_ARGS: dict[str, list[str]] = {
    "bench_cli.py": ["--runs", "1"],
    "bench_owner.py": ["--calls", "5", "--cold", "1"],
    "bench_chief_report.py": ["--count", "20", "--concurrency", "4"],
    "bench_door.py": ["3", "--time-limit-s", "30"],
    "bench_pipeline.py": ["--backlog", "10", "--rate", "50", "--rate-rows", "5"],
    "bench_vs_huey.py": ["--rows", "10", "--rounds", "1", "--rate", "50", "--rate-rows", "5"],
    "bench_backlog.py": [
        "--sizes", "20", "--full-stack-rows", "5", "--time-limit-s", "30",
    ],
    "bench_memory.py": ["--rows", "20", "--batch", "10", "--time-limit-s", "30"],
    "bench_flood.py": ["--backlog", "10", "--quiet-rows", "1", "--quiet-rate", "1"],
    "bench_door_batch.py": ["--rows", "8", "--batch", "4", "--rounds", "1"],
    "bench_wait.py": ["--rounds", "2"],
    "bench_phone_idle.py": ["--window-s", "0.2", "--settle-s", "0"],
    "bench_phone_taps.py": ["--taps", "1"],
    "bench_idle_wakeups.py": ["--window-s", "0.2", "--settle-s", "0"],
    "bench_http_bounds.py": ["--idle", "5", "--wait-s", "5"],
    "bench_deadlines.py": [
        "--count", "2", "--spacing-s", "0", "--pending", "3",
        "--window-s", "0.2", "--settle-s", "0",
    ],
    "bench_reminders_idle.py": ["--asks", "1", "--window-s", "0.2", "--settle-s", "0"],
    "bench_fallback_memory.py": ["--rounds", "1", "--settle-s", "0"],
}  # fmt: skip
# A bound per script, far above a smoke run's few seconds: a loaded 2-core machine is slow.
SMOKE_TIMEOUT_S = 90.0


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = sorted(path.name for path in BENCH.glob("bench_*.py"))
    assert scripts == sorted(SMOKE_ARGS), "add the new script to SMOKE_ARGS (or drop a gone one)"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMOKE_ARGS))
def test_bench_script_runs_at_a_tiny_size(script: str) -> None:
    # The benches' data folders go in a short TMPDIR of their own, not pytest's tmp_path: the
    # services' Unix sockets live in those folders, and a socket's path holds 107 bytes at most.
    with (
        tempfile.TemporaryDirectory(prefix="bench-") as tmp,
        subprocess.Popen(
            [sys.executable, str(BENCH / script), *SMOKE_ARGS[script]],
            cwd=REPO,
            env=child_env({"TMPDIR": tmp}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc,
    ):
        try:
            output, _ = proc.communicate(timeout=SMOKE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{script} ran past {SMOKE_TIMEOUT_S:g}s:\n{output[-3000:]}")
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{output[-3000:]}"
