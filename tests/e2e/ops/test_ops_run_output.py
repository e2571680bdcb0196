"""What `ops/run` prints, started as a person starts it and stopped at once: on a terminal
(a pseudo-terminal from util-linux `script`) every service's lines after honcho's prefix are
structlog's console lines with one timestamp (honcho's), under a pipe they are JSON; and a
pairing made with `chief telegram pair` wins over the emulator's chat 1, the door's start line
saying which chat it rings and why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.ops.test_ops_quickstart import stop_stack
from tests.support.procs import free_port
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT_S = 60.0
SERVICES = {"engine.1": "service.listening", "door.1": "door.listening"}
EMULATOR = {"telegram.1": "emulator.listening"}
# honcho's prefix: its own time, the process name, a bar (coloured on a terminal).
PREFIX = re.compile(r"^\d\d:\d\d:\d\d (\S+)\s*\| (.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
PAIRING = {
    "chat_id": 4242,
    "user_id": 4242,
    "username": None,
    "first_name": "Owner",
    "bot": "@emulator_bot",
    "paired_at": "2026-12-01T17:30:00+00:00",
}


def run_env(home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("COOP_", "CHIEF_", "TELEGRAM_"))
    }
    env.update(
        COOP_HOME=str(home),
        COOP_METRICS_PORT=str(free_port()),
        CHIEF_METRICS_PORT=str(free_port()),
        COOP_EMULATOR_PORT=str(free_port()),
    )
    return env


def started_lines(command: list[str], env: dict[str, str], log_path: Path) -> dict[str, list[str]]:
    """Start `command`, wait until each process said it listens, stop it; each process's lines
    (honcho's prefix and colours taken off)."""
    wanted = {**SERVICES, **EMULATOR}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_until_sync(
            lambda: (
                all(e in log_path.read_text(errors="replace") for e in wanted.values())
                or proc.poll() is not None
            ),
            timeout_s=STARTUP_TIMEOUT_S,
            what="the three processes to listen",
        )
    finally:
        stop_stack(proc)
    lines: dict[str, list[str]] = {}
    for raw in ANSI.sub("", log_path.read_text(errors="replace")).splitlines():
        if found := PREFIX.match(raw.strip("\r")):
            lines.setdefault(found.group(1), []).append(found.group(2))
    missing = [name for name in wanted if name not in lines]
    assert not missing, log_path.read_text(errors="replace")[-3000:]
    return lines


def test_on_a_terminal_the_services_print_console_lines_with_one_time(tmp_path: Path) -> None:
    if shutil.which("script") is None:
        pytest.skip("util-linux `script` is not installed: no pseudo-terminal to run ops/run on")
    env = run_env(tmp_path / "data")
    lines = started_lines(
        ["script", "-qfec", str(ROOT / "ops" / "run"), "/dev/null"], env, tmp_path / "tty.log"
    )
    for name in (*SERVICES, *EMULATOR):
        events = [line for line in lines[name] if "[info" in line]
        assert events, (name, lines[name])
        for line in events:
            assert not line.lstrip().startswith("{"), line
            assert not ISO_TIME.search(line), f"a second timestamp: {line}"
    (started,) = [line for line in lines["door.1"] if "door.started" in line]
    # Console values read as words, never Python literals (`plumbing.logs.readable`).
    assert "telegram_chat=1 " in started
    assert "telegram_chat_from=TELEGRAM_CHAT_ID" in started
    assert "owner_configured=yes" in started
    assert "posture_file=- " in started


def test_under_a_pipe_json_and_a_pairing_wins_over_the_emulators_chat(tmp_path: Path) -> None:
    home = tmp_path / "data"
    home.mkdir(mode=0o700)
    pairing = home / "telegram-pairing.json"
    pairing.write_text(json.dumps(PAIRING))
    pairing.chmod(0o600)
    lines = started_lines([str(ROOT / "ops" / "run")], run_env(home), tmp_path / "pipe.log")
    events: dict[str, dict] = {}
    for name in (*SERVICES, *EMULATOR):
        for line in lines[name]:
            if line.startswith("{"):
                event = json.loads(line)
                events[event["event"]] = event
        assert (SERVICES | EMULATOR)[name] in events, lines[name]
    assert "door.telegram_chat_overrides_pairing" not in events, events
    started = events["door.started"]
    assert (started.get("telegram_chat"), started.get("telegram_chat_from")) == ("4242", "pairing")
