"""Another local user standing in for a service: a throwaway account (`useradd`, removed after)
whose process listens on the TCP ports a service held or used to hold, and tries to create the
service's socket path, as a compromised low-privilege process could while the service is down.

    with Squatter.started(folder, ports=(8764, old_port), socket_path=sock) as squatter:
        ... run the clients ...
    squatter.received()      # what each connection sent it, as text (latin-1)
    squatter.socket_refused  # the errno's words when creating the socket path failed

The squatter reads whatever a connection sends for up to a second of silence, answers nothing,
and closes it: a client that sends a key to it has given it away. It runs the system's Python
(the venv's interpreter may sit under a folder only root can enter) with `setpriv`, so nothing
of the test's process is shared with it but its log file's descriptor. Only root can do this:
`skip_reason()` says why a test cannot.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until_sync

SYSTEM_PYTHON = "/usr/bin/python3"
READY_TIMEOUT_S = 10.0

# Standard library only, run by the squatter's own interpreter: one JSON line per thing seen.
SQUATTER_CODE = r"""
import json, os, socket, sys, threading

def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()

ports = [int(p) for p in sys.argv[1].split(",") if p]
socket_path = sys.argv[2]
listeners = []
for port in ports:
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        tcp.bind(("127.0.0.1", port))
        tcp.listen(64)
    except OSError as exc:
        say(port_taken=port, error=exc.strerror)
        continue
    listeners.append((tcp, f"127.0.0.1:{port}"))
    say(listening=port)
unix = socket.socket(socket.AF_UNIX)
try:
    unix.bind(socket_path)
    unix.listen(8)
except OSError as exc:
    say(socket_refused=socket_path, error=exc.strerror or str(exc))
else:
    listeners.append((unix, socket_path))
    say(socket_bound=socket_path)

def serve(conn, where):
    conn.settimeout(1.0)
    got = b""
    try:
        while len(got) < 65536:
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    conn.close()
    say(received=where, data=got.decode("latin-1"))

def accept(listener, where):
    while True:
        conn, _ = listener.accept()
        say(connected=where)
        threading.Thread(target=serve, args=(conn, where), daemon=True).start()

for listener, where in listeners:
    threading.Thread(target=accept, args=(listener, where), daemon=True).start()
say(ready=os.getuid())
threading.Event().wait()
"""


def skip_reason() -> str | None:
    """Why a squat cannot be staged here (None: it can)."""
    if os.geteuid() != 0:
        return "only root can make a throwaway user to squat a service's address"
    missing = [tool for tool in ("useradd", "userdel", "setpriv") if shutil.which(tool) is None]
    if missing or not Path(SYSTEM_PYTHON).exists():
        return f"missing {', '.join(missing) or SYSTEM_PYTHON}: no throwaway user's process"
    return None


@contextlib.contextmanager
def throwaway_user() -> Iterator[pwd.struct_passwd]:
    """A system account with no home and no login shell, removed on the way out."""
    name = "coopsq" + secrets.token_hex(4)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


class Squatter:
    """The squatting process of a throwaway user, and what its log says."""

    def __init__(self, log_path: Path, popen: subprocess.Popen[bytes]) -> None:
        self.log_path = log_path
        self.popen = popen

    @classmethod
    @contextlib.contextmanager
    def started(
        cls, folder: Path, *, ports: Sequence[int], socket_path: Path
    ) -> Iterator[Squatter]:
        """The squatter on `ports` and at `socket_path` until the block ends (its user too)."""
        log_path = folder / "squatter.jsonl"
        with throwaway_user() as user, log_path.open("wb") as log:
            popen = subprocess.Popen(
                ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                 "--clear-groups", SYSTEM_PYTHON, "-I", "-c", SQUATTER_CODE,
                 ",".join(str(port) for port in ports), str(socket_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd="/",
            )  # fmt: skip
            squatter = cls(log_path, popen)
            try:
                wait_until_sync(
                    lambda: squatter.lines("ready") or popen.poll() is not None,
                    timeout_s=READY_TIMEOUT_S,
                    what="the squatter to listen",
                )
                assert popen.poll() is None, log_path.read_text(errors="replace")
                yield squatter
            finally:
                popen.kill()
                popen.wait()

    def lines(self, key: str | None = None) -> list[dict[str, Any]]:
        found = []
        for raw in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(raw)
                if isinstance(entry, dict) and (key is None or key in entry):
                    found.append(entry)
        return found

    @property
    def listening(self) -> list[int]:
        return [int(entry["listening"]) for entry in self.lines("listening")]

    @property
    def socket_refused(self) -> str | None:
        refused = self.lines("socket_refused")
        return str(refused[0]["error"]) if refused else None

    def connections(self) -> list[str]:
        """Where each connection it accepted came in."""
        return [str(entry["connected"]) for entry in self.lines("connected")]

    def received(self) -> list[str]:
        """What each connection sent it (only those that have closed so far)."""
        return [str(entry["data"]) for entry in self.lines("received")]
