"""The README's quickstart, word for word, against a stack started by the README's run command
(`ops/run`, real processes under honcho), then a clean stop by SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.procs import free_port
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def quickstart_commands() -> list[str]:
    """The shell lines of the README's quickstart block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Quickstart", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's quickstart has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.fixture
def stack(tmp_path: Path):
    ports = {
        "COOP_SERVICE_PORT": str(free_port()),
        "CHIEF_PORT": str(free_port()),
        "COOP_EMULATOR_PORT": str(free_port()),
    }
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("COOP_", "CHIEF_", "TELEGRAM_"))
    }
    env.update(ports, COOP_HOME=str(tmp_path / "data"))
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(ROOT / "ops" / "run")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_sync(
            lambda: (
                all(
                    f'"{event}"' in log_path.read_text(errors="replace")
                    for event in ("service.listening", "door.listening", "emulator.listening")
                )
                or proc.poll() is not None
            ),
            timeout_s=STARTUP_TIMEOUT_S,
            what="the three processes to listen",
        )
        assert proc.poll() is None, log_path.read_text(errors="replace")
        yield env, ports, proc, log_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)


def run_shell(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # Each README line runs after `. ops/dev-env`, as in the user's second terminal.
    return subprocess.run(
        ["bash", "-c", f". ops/dev-env && {line}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_readme_quickstart_shows_the_line_in_chief_log_and_the_emulator(stack):
    env, ports, proc, log_path = stack
    lines = quickstart_commands()
    assert lines[0] == ". ops/dev-env"
    outputs = []
    for line in lines[1:]:
        result = run_shell(line.replace("8766", ports["COOP_EMULATOR_PORT"]), env)
        assert result.returncode == 0, (line, result.stdout, result.stderr)
        outputs.append(result.stdout)
    assert outputs[0].strip() == "todo #1 added"
    assert outputs[1].strip() == "todo #1 done; notification #1 queued"

    # The README runs `chief log` and curl right away; delivery is a kick away. Wait on the
    # condition (bounded) rather than trusting the race in a loaded test machine.
    def landed() -> str:
        out = run_shell("chief log", env).stdout
        return out if "Water the plants" in out else ""

    chief_log = wait_until_sync(landed, timeout_s=20, what="the line in chief log")
    assert "[coop]" in chief_log
    assert "todo #1 done by me: Water the plants" in chief_log
    curl = next(line for line in lines if line.startswith("curl"))
    curl = curl.replace("8766", ports["COOP_EMULATOR_PORT"])
    messages = json.loads(run_shell(curl, env).stdout)["messages"]
    assert [m["text"] for m in messages] == [
        "todo #1 done by me: Water the plants\nwatered, the basil too"
    ]

    status = run_shell("coop status --check", env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "0 pending, 1 delivered" in status.stdout

    proc.send_signal(signal.SIGTERM)  # to honcho, as systemd or a terminal would
    returncode = proc.wait(timeout=STOP_TIMEOUT_S)
    log = log_path.read_text(errors="replace")
    for name in ("telegram.1", "engine.1", "door.1"):
        assert f"{name} stopped (rc=0)" in log, log[-3000:]
    # honcho itself answers a signal with the shell's convention, 128 + SIGTERM.
    assert returncode == 128 + signal.SIGTERM, log[-3000:]
