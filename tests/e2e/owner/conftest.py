"""Real `coop serve` processes for the owner's end-to-end tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import child_env, coop
from tests.support.waiting import wait_until_sync

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0


class ServeProcess:
    """One `python -m engine serve` child, its log file, and the URL it announced."""

    def __init__(self, home: Path, env: dict[str, str], port: int = 0) -> None:
        self.home = home
        self.env = {**env, "COOP_SERVICE_PORT": str(port)}
        self.runs = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def log_path(self) -> Path:
        return self.home / f"serve-{self.runs}.log"

    def start(self) -> ServeProcess:
        self.runs += 1
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve"],
                env=child_env(self.env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        event = wait_until_sync(
            lambda: self._event("service.listening"), timeout_s=START_TIMEOUT_S, what="serve"
        )
        self.url = event["url"]
        return self

    def _event(self, name: str) -> dict | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"coop serve exited {self.proc.returncode}: {self.log()}")
        for line in self.log().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == name:
                return dict(json.loads(line))
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT_S)

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop_quietly(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)


@pytest.fixture
def stack_env(tmp_path: Path) -> dict[str, str]:
    """The environment every child shares: one data folder, nothing outside it."""
    key = tmp_path / "service.key"
    key.write_text("door-key-for-tests\n")
    key.chmod(0o600)
    env = {
        "COOP_HOME": str(tmp_path),
        "COOP_DB": str(tmp_path / "coop.db"),
        "COOP_KICK": "off",
        "COOP_ACTOR": "alice",
        "COOP_OWNER": "owner",
        "COOP_SERVICE_HOST": "127.0.0.1",
        "COOP_SERVICE_KEY_FILE": str(key),
        # No door listens here: the embedded notifier defers its rows, which is not under test.
        "COOP_DOOR_URL": "http://127.0.0.1:9/api/coop/engine/notify",
        "COOP_BACKOFF_BASE_S": "60",
    }
    for name in ("COOP_OWNER_FILE", "COOP_TEST_FAULTS", "COOP_SESSION"):
        env[name] = ""
    return env


@pytest.fixture
def serve(tmp_path: Path, stack_env: dict[str, str]) -> Iterator[ServeProcess]:
    process = ServeProcess(tmp_path, stack_env)
    try:
        yield process
    finally:
        process.stop_quietly()


def run_coop(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return coop(*args, env=env)


def ok(env: dict[str, str], *args: str) -> str:
    done = run_coop(env, *args)
    assert done.returncode == 0, f"coop {' '.join(args)}: {done.stderr}"
    return done.stdout
