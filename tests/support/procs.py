"""The one process harness of the tests and the benches: the project's own commands and
services as real processes, from the same interpreter and venv (`tests.support.stack` puts the
whole stack together from these).

    env = clean_env(folder, COOP_DB=...)         # the parent's environment, no Coop/Chief setting
    write_key(folder / "service.key", KEY)       # a 0600 key file
    coop("todo", "add", "x", env=env)            # one command, waited for (`run_module` for any)
    door = Service("door", ["chief", "serve"], folder, "door.listening", env,
                   takes_port=False)          # on its socket: `door.socket_path`
    door.start(); door.events("door.delivered"); door.cpu_s(); door.terminate(); door.kill()
    free_port(); lasting_port(); cpu_s(pid); memory_kb(pid)   # the loopback and /proc helpers

Every wait is bounded; a start that fails raises `WaitTimeout` with the tail of the process's
log.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.support.waiting import WaitTimeout, wait_until_sync

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
# First on a child's path, after the repository: a child runs with the packages an install has,
# not with the test tools' (tests/support/as_installed/rich.py says which and what it saves).
AS_INSTALLED = Path(__file__).resolve().parent / "as_installed"
CHILD_PATH = os.pathsep.join((str(REPO), str(AS_INSTALLED)))
PROCESS_TIMEOUT_S = 60.0
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
# Settings a child must not inherit from whoever runs the tests: it gets exactly the test's.
FOREIGN_PREFIXES = ("COOP_", "CHIEF_", "TELEGRAM_", "PTB_")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment for a child, with the repository importable (and the test tools'
    own packages not: `AS_INSTALLED`)."""
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = CHILD_PATH + (os.pathsep + path if path else "")
    env.update(extra or {})
    return env


def clean_env(folder: Path | None = None, **settings: str) -> dict[str, str]:
    """The parent's environment without any Coop, Chief, Telegram or PTB setting, with the
    repository importable (and the test tools' own packages not: `AS_INSTALLED`), output
    unbuffered, `COOP_HOME` at `folder`, plus `settings`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(FOREIGN_PREFIXES) and key != "PYTEST_CURRENT_TEST"
    }
    env |= {"PYTHONPATH": CHILD_PATH, "PYTHONUNBUFFERED": "1"}
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


def socket_client(path: str | Path, timeout_s: float = 10.0) -> httpx.Client:
    """An httpx client to the service on the Unix socket `path` (requests name only a path)."""
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(path)),
        base_url="http://localhost",
        timeout=timeout_s,
        trust_env=False,
    )


def free_port() -> int:
    """A loopback port free right now (for a process that must be told its port up front; a
    `Service` rather starts on port 0 and reads the port it logs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ephemeral_floor() -> int:
    """The lowest port the kernel hands out for port 0 and outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def lasting_port(attempts: int = 200) -> int:
    """A loopback port free right now and below the ephemeral range, for a process that comes
    back on its port after a kill: a port 0 gave could be taken in the gap by any process's
    outgoing connection (the power-cut run met `Address already in use` that way on a busy
    machine); no connection is given a port from below that range."""
    floor = ephemeral_floor()
    low = max(1024, floor - 12_000)
    for _ in range(attempts):
        port = random.randrange(low, floor)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return free_port()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` so far, from /proc/PID/stat (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fd_targets(pid: int | str = "self") -> list[str]:
    """What each open file descriptor of `pid` points at (/proc/PID/fd), e.g. `socket:[123]`. The
    process runs on meanwhile: a descriptor it closed between the listing and the read is not
    counted (reading it would raise FileNotFoundError)."""
    folder = f"/proc/{pid}/fd"
    targets = []
    for name in os.listdir(folder):
        try:
            targets.append(os.readlink(f"{folder}/{name}"))
        except FileNotFoundError:
            continue
    return targets


def memory_kb(pid: int) -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS of `pid`, in kB, from /proc/PID/status."""
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0])
    return found


def run_module(
    module: str,
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
    *,
    inherit: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`python -m module args...`, waited for, output captured; `env` on top of the test's
    environment, or (`inherit=False`) exactly `env`, e.g. a `clean_env`."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=child_env(env) if inherit else dict(env or {}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def coop(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
    inherit: bool = True,
) -> subprocess.CompletedProcess[str]:
    """The `coop` CLI as a real process."""
    return run_module("engine", args, env=env, timeout_s=timeout_s, inherit=inherit)


@dataclass
class Service:
    """One long-running process (`python -m <argv>`), started, restarted and stopped by a test
    or a bench: each start logs to its own file, `<folder>/logs/<name>.<start>.log`, and is
    ready when it logs its `listening_event` (a JSON line, naming its port or URL if it has
    one), or, with `ready_text`, a plain line holding that text (a third party's process)."""

    name: str
    argv: list[str]
    folder: Path
    listening_event: str
    env: dict[str, str]
    port_env: str | None = None  # the variable that carries the port (else `--port`)
    takes_port: bool = True  # False: a process without a port of its own (no `--port` either)
    keep_port: bool = True  # a restart comes back on the first start's port
    ready_text: str | None = None
    port: int | None = None
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0
    exits: list[int] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)  # spawn to listening, per start
    log_path: Path | None = None
    url: str = ""  # the `http://host:port` this start announced
    socket_path: str = ""  # the Unix socket this start announced (`socket` in its line)
    metrics_url: str = ""  # its /metrics listener on TCP, if it announced one (`metrics_url`)
    cwd: Path = REPO  # the source tree whose code `python -m` runs (a bench's baseline: main's)

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
        port = str(self.port or lasting_port()) if self.keep_port else "0"
        argv = list(self.argv)
        if not self.takes_port:
            pass
        elif self.port_env is None:
            argv += ["--port", port]
        else:
            env[self.port_env] = port
        with self.log_path.open("wb") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", *argv],
                env=env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        if wait:
            self.wait_listening()

    def wait_listening(self) -> int | None:
        """Wait (bounded) until this start is ready; its port (None for a process without)."""
        began = time.monotonic()
        if self.ready_text is not None:
            text = self.ready_text
            self.wait_for(lambda: text in self.log(), f"{self.name} to log {text!r}")
            self.start_s.append(time.monotonic() - began)
            return None
        line = self.wait_event(self.listening_event, f"{self.name} to listen")
        self.start_s.append(time.monotonic() - began)
        self.socket_path = str(line.get("socket") or "")
        self.metrics_url = str(line.get("metrics_url") or "")
        if self.socket_path:
            return None
        if "port" not in line and "url" not in line:
            return None
        port = int(line["port"]) if "port" in line else int(str(line["url"]).rsplit(":", 1)[1])
        self.url = str(line.get("url") or f"http://127.0.0.1:{port}")
        if self.keep_port:
            assert self.port in (None, port), f"{self.name} came back on {port}, not {self.port}"
        self.port = port
        return port

    def wait_event(
        self, name: str, what: str = "", timeout_s: float = START_TIMEOUT_S
    ) -> dict[str, Any]:
        """The first JSON line of this start naming event `name`, waited for (bounded); fails
        at once, with the log's tail, if the process ends first."""
        found = self.wait_for(
            lambda: self.events(name), what or f"{self.name} to log {name}", timeout_s
        )
        return found[0]

    def wait_for(
        self, condition: Callable[[], T], what: str, timeout_s: float = START_TIMEOUT_S
    ) -> T:
        """`condition()`'s first truthy value while this process runs (bounded); a process that
        ends first, or a wait that runs out, raises `WaitTimeout` with the log's tail."""
        try:
            found = wait_until_sync(
                lambda: condition() or (not self.running and "gone"),
                timeout_s=timeout_s,
                what=what,
            )
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}; {self.name}'s log ends:\n{self.log_tail()}") from None
        if found == "gone":
            found = condition()  # it may have logged it just before it ended
            if not found:
                raise WaitTimeout(
                    f"{self.name} exited ({self.popen and self.popen.returncode}) before {what};"
                    f" its log ends:\n{self.log_tail()}"
                )
        return found  # type: ignore[return-value]

    def request(self, method: str, path: str, **options: Any) -> Any:
        """One HTTP request to this start's Unix socket (`socket`), on a client of its own:
        the `httpx.Response`."""
        import httpx

        assert self.socket_path, f"{self.name} announced no socket"
        transport = httpx.HTTPTransport(uds=self.socket_path)
        timeout = options.pop("timeout", START_TIMEOUT_S)
        with httpx.Client(
            transport=transport, base_url="http://localhost", timeout=timeout, trust_env=False
        ) as client:
            return client.request(method, path, **options)

    def get(self, path: str, **options: Any) -> Any:
        return self.request("GET", path, **options)

    def post(self, path: str, **options: Any) -> Any:
        return self.request("POST", path, **options)

    def cpu_s(self) -> float:
        """User + system CPU seconds of this start so far."""
        return cpu_s(self.pid)

    def memory_kb(self) -> dict[str, int]:
        """VmHWM and VmRSS of this start, in kB."""
        return memory_kb(self.pid)

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
        """SIGTERM, the normal stop; returns the exit status (bounded wait: a process still
        there after it is SIGKILLed, and the status says so)."""
        assert self.popen is not None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.popen.kill()
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
