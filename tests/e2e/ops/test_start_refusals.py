"""Every service refuses a start it cannot make in one line, the same shape for each, before any
line saying it started: the door (`chief serve`), the engine service (`coop serve`), the
standalone notifier (`coop-notifier run`) and the Bot API emulator (`chief telegram-emulator`),
each as a real process, against each start-up failure it can meet:

    port taken          a live listener on its TCP port (the /metrics ports, the emulator's)
    socket held         a live process answering on its Unix socket
    folder not private  its socket's folder writable by others
    bad setting         a value its settings refuse
    database unusable   its database file not a database
    log unwritable      the emulator's --log where no file can be made

The line: `PROG: ...`, naming the setting and the address or file; exit non-zero; nothing
else on stdout or stderr (no traceback, no `[Errno 98]`, no log event, no "see the log above").
And the door, the engine service and the notifier refuse before their web and Bot API libraries
load (FastAPI, Starlette, uvicorn, python-telegram-bot: about 0.3-0.5 s of CPU a start, which the
suite's hundreds of refused starts paid; read from the child's own import log,
PYTHONPROFILEIMPORTTIME). The emulator, a test tool, builds its app before it binds.
The notifier has no port; its socket is its kick datagram beside the ledger. It does not refuse a
data folder others can write (its kick socket may fall back to /tmp, which everyone can).

Before this, the emulator on a taken port printed uvicorn's `[Errno 98] error while attempting
to bind ...` and then `see the log above`; the door with an unusable chief.db printed its log
event, uvicorn's `Application startup failed. Exiting.` and `see the log above`; `coop serve`
printed each refusal twice (a JSON event and the line); the notifier on an unusable database
logged `notifier.daemon.started` and retried for ever.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.procs import clean_env, run_module, write_key

START_BOUND_S = 60.0  # a service that starts anyway runs until this bound: the test fails
# What a refused start of a service (the emulator aside) never loads.
HEAVY = ("fastapi", "starlette", "uvicorn", "telegram")
IMPORT_LOG = "import time:"


@dataclass(frozen=True)
class Service:
    prog: str
    module: str
    args: tuple[str, ...]


DOOR = Service("chief serve", "chief", ("serve",))
ENGINE = Service("coop serve", "notifier", ("serve",))
NOTIFIER = Service("coop-notifier", "notifier", ("run",))
EMULATOR = Service("chief telegram-emulator", "chief", ("telegram-emulator", "--host", "127.0.0.1"))


@dataclass
class Setup:
    """One service's start in `folder`: its settings and arguments, and what holds a place."""

    folder: Path
    held: ExitStack
    env: dict[str, str]
    args: list[str]

    def taken_port(self) -> int:
        """A port a live listener holds for the test's length."""
        sock = self.held.enter_context(socket.socket())
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        return int(sock.getsockname()[1])

    def live_socket(self, name: str) -> Path:
        """A Unix socket in the data folder that a live listener answers on."""
        path = self.folder / name
        sock = self.held.enter_context(socket.socket(socket.AF_UNIX))
        sock.bind(str(path))
        sock.listen(1)
        return path

    def open_folder(self) -> Path:
        """A folder every user can write."""
        shared = self.folder / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        return shared

    def not_a_database(self, name: str) -> Path:
        path = self.folder / name
        path.write_bytes(b"this is not a database file " * 100)
        return path


Arrange = Callable[[Setup], str]  # sets the failure up; returns words the line must hold


def door_port_taken(s: Setup) -> str:
    port = s.taken_port()
    s.env["CHIEF_METRICS_PORT"] = str(port)
    return f"cannot listen on 127.0.0.1:{port} (CHIEF_METRICS_PORT)"


def door_socket_held(s: Setup) -> str:
    path = s.live_socket("door.sock")
    return f"cannot listen on {path} (COOP_DOOR_SOCKET): another process already answers"


def door_folder_open(s: Setup) -> str:
    path = s.open_folder() / "door.sock"
    s.env["COOP_DOOR_SOCKET"] = str(path)
    return f"cannot listen on {path} (COOP_DOOR_SOCKET)"


def door_bad_setting(s: Setup) -> str:
    s.env["CHIEF_METRICS_PORT"] = "eighty"
    return "CHIEF_METRICS_PORT"


def door_database(s: Setup) -> str:
    path = s.not_a_database("chief.db")
    return f"{path}: file is not a database"


def engine_port_taken(s: Setup) -> str:
    port = s.taken_port()
    s.env["COOP_METRICS_PORT"] = str(port)
    return f"cannot listen on 127.0.0.1:{port} (COOP_METRICS_PORT)"


def engine_socket_held(s: Setup) -> str:
    path = s.live_socket("service.sock")
    return f"cannot listen on {path} (COOP_SERVICE_SOCKET): another process already answers"


def engine_folder_open(s: Setup) -> str:
    path = s.open_folder() / "service.sock"
    s.env["COOP_SERVICE_SOCKET"] = str(path)
    return f"cannot listen on {path} (COOP_SERVICE_SOCKET)"


def engine_bad_setting(s: Setup) -> str:
    s.env["COOP_METRICS_PORT"] = "eighty"
    return "COOP_METRICS_PORT"


def engine_database(s: Setup) -> str:
    path = s.not_a_database("coop.db")
    return f"cannot open the Coop database at {path}: file is not a database"


def notifier_bad_setting(s: Setup) -> str:
    s.env["COOP_BACKOFF_BASE_S"] = "soon"
    return "COOP_BACKOFF_BASE_S"


def notifier_socket_held(s: Setup) -> str:
    path = s.folder / "coop.db.kick"
    sock = s.held.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM))
    sock.bind(str(path))
    return f"cannot listen on {path} (the kick socket beside COOP_DB): another notifier daemon"


def notifier_database(s: Setup) -> str:
    path = s.not_a_database("coop.db")
    return f"cannot open the Coop database at {path}: file is not a database"


def emulator_port_taken(s: Setup) -> str:
    port = s.taken_port()
    s.args += ["--port", str(port)]
    return f"cannot listen on 127.0.0.1:{port} (--port)"


def emulator_bad_setting(s: Setup) -> str:
    s.args += ["--port", "eighty"]
    return "--port"


def emulator_log_unwritable(s: Setup) -> str:
    path = s.folder / "no-such-folder" / "received.jsonl"
    s.args += ["--port", "0", "--log", str(path)]
    return f"cannot write --log {path}"


CASES: list[tuple[Service, Arrange]] = [
    (DOOR, door_port_taken),
    (DOOR, door_socket_held),
    (DOOR, door_folder_open),
    (DOOR, door_bad_setting),
    (DOOR, door_database),
    (ENGINE, engine_port_taken),
    (ENGINE, engine_socket_held),
    (ENGINE, engine_folder_open),
    (ENGINE, engine_bad_setting),
    (ENGINE, engine_database),
    (NOTIFIER, notifier_socket_held),
    (NOTIFIER, notifier_bad_setting),
    (NOTIFIER, notifier_database),
    (EMULATOR, emulator_port_taken),
    (EMULATOR, emulator_bad_setting),
    (EMULATOR, emulator_log_unwritable),
]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    folder = tmp_path / "data"
    folder.mkdir(mode=0o700)
    key = write_key(folder / "service.key", "start-refusals-key-0123456789abcdef")
    env = clean_env(
        folder,
        COOP_SERVICE_KEY_FILE=str(key),
        CHIEF_OWNER="owner",
        COOP_ACTOR="prover",
        CHIEF_METRICS_PORT="off",
        COOP_METRICS_PORT="off",
        COOP_LOG_FORMAT="json",
    )
    with ExitStack() as held:
        yield Setup(folder, held, env, [])


@pytest.mark.parametrize(
    ("service", "arrange"),
    CASES,
    ids=[f"{service.prog}-{arrange.__name__}" for service, arrange in CASES],
)
def test_a_start_that_cannot_be_made_is_one_line_and_a_non_zero_exit(
    setup: Setup, service: Service, arrange: Arrange
) -> None:
    words = arrange(setup)
    if service is not EMULATOR:
        setup.env["PYTHONPROFILEIMPORTTIME"] = "1"
    try:
        done = run_module(
            service.module,
            [*service.args, *setup.args],
            env=setup.env,
            timeout_s=START_BOUND_S,
            inherit=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{service.prog} started anyway: {exc.stderr!r}")
    output = (done.stdout + done.stderr).splitlines()
    said = [line for line in output if not line.startswith(IMPORT_LOG)]
    loaded = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in output
        if line.startswith(IMPORT_LOG)
    }
    assert not loaded & set(HEAVY), f"{service.prog} loaded {sorted(loaded & set(HEAVY))}"
    assert done.returncode != 0, said
    assert len(said) == 1, "\n".join(said)
    (line,) = said
    assert line.startswith(f"{service.prog}: "), line
    assert words in line, (words, line)
    for noise in ("Traceback", "[Errno", "see the log above", "started", "listening"):
        assert noise not in line, line
