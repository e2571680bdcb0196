"""The connection gate (`plumbing.http.gate`) on a real uvicorn listening on a Unix socket
(`plumbing.unix.bind_private`), asked with httpx over the socket.

- Requests are answered over the socket, on one keep-alive connection and on fresh ones, and
  the gate knows each request's connection: a request held in the app past the deadline is
  not closed, and pipelined requests on one connection are each counted as answered on it.
- uvicorn's own `uds` option (a 0666 socket) is refused by `loopback_config`.
- Another local user (a throwaway account; real processes running as it) cannot be served:
  its connect is refused by the socket's 0600 mode, and where the test opens a socket to it (an
  0777 folder, an 0666 socket) the gate closes its connection before a byte is read ("stranger").

The other-user tests need root (they create an account); they skip in one line otherwise.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from starlette.types import Receive, Scope, Send

from plumbing.http.gate import ConnectionGate
from plumbing.http.server import QuietServer, loopback_config
from plumbing.unix import bind_private

DEADLINE_S = 0.3
#: The only interpreter another user can surely run (the test's venv may sit in a folder it
#: cannot read); the child uses the standard library alone.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


class _InTest(QuietServer):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals belong to the test runner


class App:
    """Answers `ok`; `/slow` waits for `release` first."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.in_app = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        if scope["path"] == "/slow":
            self.in_app += 1
            await self.release.wait()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def serving(gate: ConnectionGate, app: App, sock: socket.socket) -> AsyncIterator[None]:
    server = _InTest(loopback_config(app, gate, lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield
        finally:
            app.release.set()
            server.request_stop()


def client(path: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://coop", timeout=5.0
    )


@pytest.fixture
def socket_path() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="gate-")  # short: a socket path holds 107 bytes
    try:
        yield os.path.join(folder, "s.sock")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_requests_are_answered_over_a_unix_socket(socket_path: str) -> None:
    gate = ConnectionGate(max_connections=10, request_deadline_s=60.0)
    async with serving(gate, App(), bind_private(socket_path)), client(socket_path) as kept:
        for _ in range(3):
            assert (await kept.get("/")).text == "ok"
        async with client(socket_path) as fresh:
            assert (await fresh.get("/")).status_code == 200
        assert 3 in {conn.served for conn in gate.live}  # the kept one: all three its own
    assert not any(gate.shed.values())


async def test_a_request_in_the_app_past_the_deadline_is_not_closed(socket_path: str) -> None:
    app = App()
    gate = ConnectionGate(max_connections=10, request_deadline_s=DEADLINE_S)
    async with serving(gate, app, bind_private(socket_path)), client(socket_path) as asker:
        async with anyio.create_task_group() as tg:
            answers: list[httpx.Response] = []

            async def ask() -> None:
                answers.append(await asker.get("/slow"))

            tg.start_soon(ask)
            with anyio.fail_after(5):
                while app.in_app < 1:
                    await anyio.sleep(0.01)
            await anyio.sleep(DEADLINE_S * 3)  # the deadline passes while the app holds it
            app.release.set()
        assert answers[0].text == "ok"
    assert gate.shed["timed_out"] == 0


async def test_pipelined_requests_are_each_answered_on_their_connection(socket_path: str) -> None:
    gate = ConnectionGate(max_connections=10, request_deadline_s=60.0)
    request = b"GET / HTTP/1.1\r\nHost: coop\r\n\r\n"
    async with (
        serving(gate, App(), bind_private(socket_path)),
        await anyio.connect_unix(socket_path) as stream,
    ):
        await stream.send(request * 3)
        received = b""
        with anyio.fail_after(5):
            while received.count(b"\r\n\r\nok") < 3:
                received += await stream.receive()
        (conn,) = gate.live
        assert conn.served == 3
        assert conn.timer is not None  # the next request's deadline runs again


def test_uvicorns_own_unix_socket_is_refused(socket_path: str) -> None:
    with pytest.raises(ValueError, match="bind_private"):
        loopback_config(App(), uds=socket_path)


# -- another local user ----------------------------------------------------------------------

#: Connects to the socket named in argv[1], sends one request and says what happened.
_CHILD = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except PermissionError:
    print("refused"); sys.exit(0)
try:
    s.sendall(b"GET / HTTP/1.1\\r\\nHost: coop\\r\\n\\r\\n")
    print("answered" if s.recv(100) else "closed")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
"""


@pytest.fixture
def stranger() -> Iterator[pwd.struct_passwd]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a throwaway user")
    name = f"gt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


async def as_user(user: pwd.struct_passwd, path: str) -> str:
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    done = await anyio.run_process([*argv, SYSTEM_PYTHON, "-c", _CHILD, path], check=True)
    return done.stdout.decode().strip()


async def test_another_user_cannot_connect_to_the_private_socket(
    socket_path: str, stranger: pwd.struct_passwd
) -> None:
    # The folder may be entered; the socket's own mode keeps the other user out.
    os.chmod(os.path.dirname(socket_path), 0o755)  # noqa: S103
    gate = ConnectionGate()
    async with serving(gate, App(), bind_private(socket_path)):
        assert await as_user(stranger, socket_path) == "refused"


async def test_another_user_reaching_an_opened_socket_is_closed_by_the_gate(
    socket_path: str, stranger: pwd.struct_passwd
) -> None:
    folder = Path(socket_path).parent
    folder.chmod(0o777)  # a mistake the uid check still holds against
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(socket_path)
    sock.listen()
    os.chmod(socket_path, 0o666)  # noqa: S103  (the mistake under test)
    gate = ConnectionGate()
    async with serving(gate, App(), sock), client(socket_path) as own:
        assert await as_user(stranger, socket_path) == "closed"
        assert gate.shed["stranger"] == 1
        assert (await own.get("/")).text == "ok"  # the server's own user is still served
