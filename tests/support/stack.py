"""The whole stack as real processes over one data folder: the harness of the proof suite and
of every bench that starts processes (`tests.support.procs` holds the pieces).

    stack = Stack(folder)                 # coop.db, chief.db, a 0600 key, the logs under folder
    stack.start()                         # the emulator, the door (`chief serve`), `engine serve`
                                          # (on <folder>/service.sock: a folder of 0700, short
                                          # enough for a socket's 107 bytes)
    stack.start_door(); stack.start_engine()          # the same, step by step
    stack.start_test_door(); stack.start_notifier()   # the minimal door; `notifier run`
    stack.door.kill(); stack.door.start(faults="door.after_report")
    stack.cpu()                           # CPU seconds by process, from /proc
    stack.stop()                          # SIGTERM in reverse start order: the exit statuses
    stack.close()                         # SIGKILL whatever a failed run left running

Each process is a `procs.Service`: it starts on a free port below the ephemeral range the
first time (`procs.lasting_port`; one on port 0 may be taken by an outgoing connection while
the part is down) and logs its port in its `*.listening` line; a restart reuses that port
(the engine reads the door's URL once, the door the emulator's), so a killed part comes back
where its peers look for it. Every start logs to
its own file under `<folder>/logs/`. Producers write coop.db directly (local mode, no owner
file) and wake the daemon with a datagram (`COOP_KICK=datagram`): no detached one-shot drainer
can outlive a test or a bench.

The far end logs what it received to `receipt_log` (JSON lines `{"text", "received_at"}`): the
emulator's `--log`, or the minimal test door's. The emulator's control endpoint
(`/emulator/...`) is behind `arm_telegram_fault` (`replace=True` swaps the armed faults in one
step) and `telegram_calls`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.procs import Service, clean_env, socket_client, write_key

SERVICE_KEY = "stack-service-key-0123456789abcdef"
BOT_TOKEN = "123456:stack-token"
CHAT_ID = "4242"
OWNER = "owner"
ACTOR = "prover"
NOTIFY_PATH = "/api/coop/engine/notify"
STATUS_PATH = "/api/coop/engine/status"
SERVICE_KEY_HEADER = "X-Coop-Service-Key"
CONTROL_TIMEOUT_S = 10.0


def stack_env(folder: Path, **settings: str) -> dict[str, str]:
    """Every process's environment over `folder`: the parent's without any Coop, Chief,
    Telegram or PTB setting, plus the stack's, plus `settings`."""
    ours = {
        "COOP_DB": str(folder / "coop.db"),
        "COOP_SERVICE_KEY_FILE": str(folder / "service.key"),
        "COOP_ACTOR": ACTOR,
        "COOP_KICK": "datagram",
        "CHIEF_OWNER": OWNER,
        # Short deferrals: a door that is down for a restart is retried within 0.2 s of its return.
        "COOP_BACKOFF_BASE_S": "0.05",
        "COOP_BACKOFF_MAX_S": "0.2",
        "COOP_CLIENT_TIMEOUT_S": "10",
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "TELEGRAM_CHAT_ID": CHAT_ID,
        "TELEGRAM_TIMEOUT_S": "5",
    }
    return clean_env(folder, **(ours | settings))


class Stack:
    """The stack's processes over one data folder; each part is started only when asked."""

    def __init__(
        self,
        folder: Path,
        *,
        door_env: dict[str, str] | None = None,
        engine_env: dict[str, str] | None = None,
        emulator_args: tuple[str, ...] = (),
    ) -> None:
        self.folder = folder
        self.coop_db = folder / "coop.db"
        self.chief_db = folder / "chief.db"
        self.receipt_log = folder / "received.jsonl"
        self.key_file = write_key(folder / "service.key", SERVICE_KEY)
        self.label = ""  # what the far end is, for a bench's first line
        self.started: list[Service] = []  # in start order; a restart keeps its place
        self.emulator = Service(
            "emulator",
            ["chief", "telegram-emulator", "--host", "127.0.0.1", "--token", BOT_TOKEN,
             "--log", str(self.receipt_log), *emulator_args],
            folder,
            "emulator.listening",
            stack_env(folder),
        )  # fmt: skip
        self.door = Service(
            "door",
            ["chief", "serve"],
            folder,
            "door.listening",
            stack_env(folder, **({"CHIEF_METRICS_PORT": "off"} | (door_env or {}))),
            takes_port=False,  # on its socket, <folder>/door.sock, where its clients look
        )
        self.test_door = Service(
            "test-door",
            ["tests.support.loopback_door", "--key", SERVICE_KEY, "--log", str(self.receipt_log)],
            folder,
            "test_door.listening",
            stack_env(folder),
            takes_port=False,  # on the door's socket, <folder>/door.sock, as the door would be
        )
        self.engine = Service(
            "engine",
            ["engine", "serve"],
            folder,
            "service.listening",
            # Its socket is `<folder>/service.sock` (the door's default too); /metrics on any
            # free port.
            stack_env(folder, **({"COOP_METRICS_PORT": "0"} | (engine_env or {}))),
            takes_port=False,
        )
        self.notifier = Service(
            "notifier",
            ["notifier", "run"],
            folder,
            "notifier.daemon.started",
            stack_env(folder, **(engine_env or {})),
            takes_port=False,
        )

    # -- starting and stopping --------------------------------------------------------------

    def add(self, service: Service) -> Service:
        """Start one more process with the stack (a bench's peer queue), stopped with it."""
        service.start()
        self._started(service)
        return service

    def _started(self, service: Service) -> None:
        if service not in self.started:
            self.started.append(service)

    def start(self) -> None:
        """The emulator, the door and the engine service."""
        self.start_door()
        self.start_engine()

    def start_door(self) -> None:
        """The Telegram emulator, then the door (`chief serve`) sending to it."""
        self.emulator.start()
        self._started(self.emulator)
        self.door.env["TELEGRAM_API_BASE"] = f"{self.emulator.url}/bot"
        self.door.start()
        self._started(self.door)
        self.label = "engine -> notifier -> chief serve -> Telegram emulator"

    def start_test_door(self) -> None:
        """The minimal test door in its own process (the door's contract, no Chief, no
        Telegram): the notifier measured alone."""
        self.test_door.start()
        self._started(self.test_door)
        self.label = "engine -> notifier -> minimal test door"

    @property
    def door_socket(self) -> Path:
        """The door's socket (the Chief's door's, or the test door's): `<folder>/door.sock`,
        where every client of the folder looks by default."""
        return self.folder / "door.sock"

    def start_engine(self) -> None:
        """`engine serve` (the owner endpoint and the notifier daemon), sending to the running
        door; ready once its daemon has bound the kick socket."""
        self.engine.start()
        self._started(self.engine)
        self.engine.wait_event("notifier.daemon.started")

    def start_notifier(self) -> None:
        """The standalone daemon (`notifier run`), sending to the running door."""
        self.notifier.start()
        self._started(self.notifier)

    def env(self, **settings: str) -> dict[str, str]:
        """A producer's environment: the same folder and database."""
        return stack_env(self.folder, **settings)

    def running(self) -> list[Service]:
        return [part for part in self.started if part.running]

    def stop(self) -> dict[str, int]:
        """SIGTERM each running part, last started first; their exit statuses by name."""
        return {part.name: part.terminate() for part in reversed(self.running())}

    def close(self) -> None:
        """SIGKILL whatever is still running (a failed run's leftovers)."""
        for part in self.running():
            part.kill()

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of each running part, by name."""
        return {part.name: part.cpu_s() for part in self.running()}

    # -- the emulator's control endpoint and the door's status ------------------------------

    def _emulator(self, method: str, path: str, **kwargs: Any) -> Any:
        url = f"{self.emulator.url}/emulator/{path}"
        with httpx.Client(timeout=CONTROL_TIMEOUT_S, trust_env=False) as client:
            answer = client.request(method, url, **kwargs)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def arm_telegram_fault(self, **fault: Any) -> None:
        self._emulator("POST", "faults", json=fault)

    def arm_telegram_replies(self, **armed: Any) -> None:
        """Answers the door cannot read (`chief.telegram.emulator.replies`; clear=True forgets
        them)."""
        self._emulator("POST", "replies", json=armed)

    def telegram_calls(self) -> dict[str, Any]:
        return dict(self._emulator("GET", "calls"))

    def telegram_faults_left(self) -> int:
        return sum(int(f["remaining"]) for f in self._emulator("GET", "faults")["faults"])

    def door_request(
        self, method: str, path: str, *, timeout: float = CONTROL_TIMEOUT_S, **kwargs: Any
    ) -> httpx.Response:
        """One request to the door on its socket (`path`: the route alone)."""
        with socket_client(self.door_socket, timeout) as client:
            return client.request(method, path, **kwargs)

    def door_status(self) -> dict[str, Any]:
        """The door's status endpoint, with the service key."""
        with socket_client(self.door_socket, CONTROL_TIMEOUT_S) as client:
            answer = client.get(STATUS_PATH, headers={SERVICE_KEY_HEADER: SERVICE_KEY})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())
