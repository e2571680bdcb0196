"""Real `coop serve` processes for the owner's end-to-end tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.procs import Service, child_env, coop

STOP_TIMEOUT_S = 20.0


class ServeProcess(Service):
    """One `python -m engine serve` child over `home` (its logs in `home/logs/`), with the
    test's environment on top of the parent's, on its socket `<COOP_HOME>/service.sock` (the
    `socket` its listening line names) and /metrics on any free port."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        super().__init__(
            "serve",
            ["engine", "serve"],
            home,
            "service.listening",
            child_env({"COOP_METRICS_PORT": "0", **env}),  # /metrics on any free port
            takes_port=False,
        )

    def start(self, *, faults: str = "", wait: bool = True) -> ServeProcess:  # type: ignore[override]
        super().start(faults=faults, wait=wait)
        return self

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.popen

    def stop_quietly(self) -> None:
        if self.running:
            self.kill()


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
        "COOP_ACTOR": "agent",
        "COOP_OWNER": "owner",
        "COOP_SERVICE_KEY_FILE": str(key),
        "COOP_METRICS_PORT": "0",  # the service's socket is <COOP_HOME>/service.sock
        # No door listens at <COOP_HOME>/door.sock unless a test serves one there: the embedded
        # notifier defers its rows, which is not under test.
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
