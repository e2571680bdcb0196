"""The one process harness of the tests and the benches: the project's own commands and
services as real processes, from the same interpreter and venv.

    env = clean_env(folder, COOP_DB=...)         # the parent's environment, no Coop/Chief setting
    write_key(folder / "service.key", KEY)       # a 0600 key file
    coop("todo", "add", "x", env=env)            # one command, waited for (`run_module` for any)
    door = Service("door", ["chief", "serve"], folder, "door.listening", env,
                   port_env="CHIEF_PORT")
    door.start(); door.events("door.delivered"); door.terminate(); door.kill()

Every wait is bounded; a start that fails raises with the tail of the process's log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until_sync

REPO = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# Settings a child must not inherit from whoever runs the tests: it gets exactly the test's.
FOREIGN_PREFIXES = ("COOP_", "CHIEF_", "TELEGRAM_", "PTB_")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment for a child, with the repository importable."""
    env = dict(os.environ)
    root = str(REPO)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def clean_env(folder: Path | None = None, **settings: str) -> dict[str, str]:
    """The parent's environment without any Coop, Chief, Telegram or PTB setting, with the
    repository importable and output unbuffered, `COOP_HOME` at `folder`, plus `settings`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(FOREIGN_PREFIXES) and key != "PYTEST_CURRENT_TEST"
    }
    env |= {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    if folder is not None:
        env["COOP_HOME"] = str(folder)
    return env | settings


def write_key(path: Path, key: str, mode: int = 0o600) -> Path:
    """A key file as the services read it: the key and a newline, private to its owner."""
    path.write_text(key + "\n")
    os.chmod(path, mode)
    return path


def read_events(path: Path | None, name: str | None = None) -> list[dict[str, Any]]:
    """The JSON log lines of `path` (all, or those of one event); other lines are skipped."""
    if path is None or not path.exists():
        return []
    found = []
    for raw in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and (name is None or entry.get("event") == name):
            found.append(entry)
    return found


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


@dataclass
class Service:
    """One long-running process (`python -m <argv>`), started, restarted and stopped by a test
    or a bench: each start logs to its own file, `<folder>/logs/<name>.<start>.log`, and is
    ready when it logs its `listening_event` (a JSON line naming its port or URL)."""

    name: str
    argv: list[str]
    folder: Path
    listening_event: str
    env: dict[str, str]
    port_env: str | None = None  # the variable that carries the port (else `--port`)
    keep_port: bool = True  # a restart comes back on the first start's port
    port: int | None = None
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)  # spawn to listening, per start
    log_path: Path | None = None
    url: str = ""  # the `http://host:port` this start announced

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def start(self, *, faults: str = "", wait: bool = True) -> None:
        """Spawn the process (on its known port after the first start) and, unless told not
        to, wait until it logs that it listens."""
        assert not self.running, f"{self.name} is already running"
        self.starts += 1
        logs = self.folder / "logs"
        logs.mkdir(exist_ok=True)
        self.log_path = logs / f"{self.name}.{self.starts}.log"
        env = dict(self.env)
        if faults:
            env["COOP_TEST_FAULTS"] = faults
        port = str(self.port or 0) if self.keep_port else "0"
        argv = list(self.argv)
        if self.port_env is None:
            argv += ["--port", port]
        else:
            env[self.port_env] = port
        with self.log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", *argv],
                env=env,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if wait:
            self.wait_listening()

    def wait_listening(self) -> int:
        began = time.monotonic()
        found = wait_until_sync(
            lambda: self.events(self.listening_event) or not self.running,
            timeout_s=START_TIMEOUT_S,
            what=f"{self.name} to listen",
        )
        if not isinstance(found, list):
            raise AssertionError(f"{self.name} did not start:\n{self.log_tail()}")
        self.start_s.append(time.monotonic() - began)
        line = found[0]
        port = int(line["port"]) if "port" in line else int(str(line["url"]).rsplit(":", 1)[1])
        self.url = str(line.get("url") or f"http://127.0.0.1:{port}")
        if self.keep_port:
            assert self.port in (None, port), f"{self.name} came back on {port}, not {self.port}"
        self.port = port
        return port

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """This start's JSON log lines (all, or those of one event)."""
        return read_events(self.log_path, name)

    def all_events(self, name: str) -> list[dict[str, Any]]:
        """One event across every start of this process."""
        found = []
        for path in sorted((self.folder / "logs").glob(f"{self.name}.*.log")):
            found += read_events(path, name)
        return found

    def log(self) -> str:
        """This start's whole log."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> int:
        """SIGKILL, as a power cut would; returns the exit status once it is gone."""
        assert self.popen is not None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        return self._reaped()

    def terminate(self) -> int:
        """SIGTERM, the normal stop; returns the exit status (bounded wait)."""
        assert self.popen is not None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return self._reaped()

    def wait_exit(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """Wait (bounded) for the process to end by itself, e.g. at an armed fault point."""
        assert self.popen is not None
        try:
            self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout_s}s:\n{self.log_tail()}"
            ) from None
        return self._reaped()

    def _reaped(self) -> int:
        assert self.popen is not None
        status = self.popen.wait(STOP_TIMEOUT_S)
        self.exits.append(status)
        self.popen = None
        return status
