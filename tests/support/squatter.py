"""Another local user who grabs a service's address while the service is down: a throwaway
account made for the test, and a process run as that account that listens on loopback TCP
ports, tries to create the service's Unix socket, and records every byte it receives.

    with throwaway_user() as user:                        # useradd; userdel -r after
        with Squatter(user, ports=[8765], socket_path=home / "door.sock") as squatter:
            ...                                           # run the clients
        squatter.received()                               # {port: bytes}: what reached it
        squatter.socket_attempt                           # "refused: ..." or "created"

It answers whatever it receives as a door that accepted it (`200 {"delivered": true, ...}`):
a client that takes that answer marks its row delivered, so the test sees that too.

Needs root (useradd, setpriv); `needs_root` is the skip mark. As a script (what the account
runs, with the system's python3 and the standard library only):

    python3 squatter.py RECORD_DIR SOCKET_PATH PORT [PORT ...]
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
READY_TIMEOUT_S = 20.0
ANSWER = b'{"delivered": true, "chief_message_id": 1, "answered": true}'


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: Path


def root_reason() -> str | None:
    """Why the other-user tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root: it creates a throwaway account (useradd) and runs a process as it"
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            return f"{tool} is missing: no second local user can be made"
    if not Path(SYSTEM_PYTHON).exists():
        return f"{SYSTEM_PYTHON} is missing: the other user's process has nothing to run"
    return None


@contextlib.contextmanager
def throwaway_user() -> Iterator[User]:
    """A fresh local account with its own home under /tmp, removed (home included) after."""
    name = "coopsq" + secrets.token_hex(4)
    home = Path("/tmp") / name
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/usr/sbin/nologin",
         "--user-group", name],
        check=True,
        capture_output=True,
    )  # fmt: skip
    try:
        import pwd

        entry = pwd.getpwnam(name)
        yield User(name, entry.pw_uid, entry.pw_gid, home)
    finally:
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


@dataclass
class Squatter:
    """The squatting process of `user` (see the module docstring)."""

    user: User
    ports: Sequence[int]
    socket_path: Path
    popen: subprocess.Popen[str] | None = None
    listening: list[int] = field(default_factory=list)
    socket_attempt: str = ""

    @property
    def record_dir(self) -> Path:
        return self.user.home / "record"

    def __enter__(self) -> Squatter:
        script = Path(__file__)
        self.popen = subprocess.Popen(
            ["setpriv", f"--reuid={self.user.uid}", f"--regid={self.user.gid}",
             "--clear-groups", SYSTEM_PYTHON, "-I", str(script), str(self.record_dir),
             str(self.socket_path), *map(str, self.ports)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )  # fmt: skip
        assert self.popen.stdout is not None
        ready: list[str] = []
        reader = threading.Thread(
            target=lambda: ready.append(self.popen.stdout.readline()),  # type: ignore[union-attr]
            daemon=True,
        )
        reader.start()
        reader.join(READY_TIMEOUT_S)
        line = ready[0] if ready else ""
        if not line.startswith("ready "):
            self.popen.terminate()
            err = self.popen.stderr.read() if self.popen.stderr else ""
            self.__exit__(None, None, None)
            raise AssertionError(f"the squatter did not start: {line!r} {err[-2000:]}")
        _, listening, attempt = line.rstrip("\n").split(" ", 2)
        self.listening = [int(port) for port in listening.split(",") if port]
        self.socket_attempt = attempt
        return self

    def __exit__(self, *_: object) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()

    def received(self) -> dict[int, bytes]:
        """Every byte each port received, by port (a port that received nothing is absent)."""
        found: dict[int, bytes] = {}
        if not self.record_dir.exists():
            return found
        for path in sorted(self.record_dir.glob("port-*.bin")):
            data = path.read_bytes()
            if data:
                port = int(path.stem.split("-", 2)[1])
                found[port] = found.get(port, b"") + data
        return found


# -- the process the other user runs (standard library only) ---------------------------------


def _serve_one(conn: socket.socket, record: Path) -> None:
    with conn, record.open("ab") as out:
        conn.settimeout(1.0)
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                out.write(data)
                out.flush()
                if b"\r\n\r\n" in data or b"\n\n" in data:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: " + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER
                    )
        except OSError:
            return


def _accept_loop(server: socket.socket, record_dir: Path) -> None:
    port = server.getsockname()[1]
    while True:
        conn, _ = server.accept()
        record = record_dir / f"port-{port}-{secrets.token_hex(4)}.bin"
        threading.Thread(target=_serve_one, args=(conn, record), daemon=True).start()


def _try_socket(path: str) -> str:
    """What happened when this user tried to create the service's socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(8)
    except OSError as exc:
        sock.close()
        return f"refused:{exc.strerror or exc}".replace(" ", "_")
    # Kept open and listening: if it ever works, a client would find it.
    _KEPT.append(sock)
    return "created"


_KEPT: list[socket.socket] = []


def main(argv: Sequence[str]) -> int:
    record_dir, socket_path, *ports = argv
    os.makedirs(record_dir, exist_ok=True)
    listening = []
    for raw in ports:
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("127.0.0.1", int(raw)))
        except OSError as exc:
            print(f"cannot listen on 127.0.0.1:{raw}: {exc}", file=sys.stderr, flush=True)
            return 1
        server.listen(64)
        listening.append(raw)
        threading.Thread(target=_accept_loop, args=(server, Path(record_dir)), daemon=True).start()
    attempt = _try_socket(socket_path)
    print(f"ready {','.join(listening)} {attempt}", flush=True)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
