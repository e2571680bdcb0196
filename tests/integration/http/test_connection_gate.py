"""The connection gate (`plumbing.http.gate`) on a real uvicorn on loopback, with a short
deadline and a small cap so that nothing waits long.

- A connection that sends nothing, one that sends half its headers, and one that stops in the
  middle of its body are each closed once the request deadline passes.
- At the cap, a newcomer takes the place of the connection quiet longest (nothing sent since it
  opened or since its last answer); a kept-alive client whose connection made room opens a new
  one for its next request. A connection that has sent part of a request is never evicted, however
  old: when every connection is sending or in the app, a newcomer is closed at once, and served
  again once one answers.
- Every answer carries a `Date` header (the server no longer ticks to refresh one).
- A kept-alive connection quiet after its answers is closed at the deadline as uvicorn would,
  counted ("idle") without a warning; one that never asked is warned of ("timed_out").
- Answers left unread past the deadline (the write buffer full) abort the connection
  ("unread"): a client that never reads does not hold a place for good.
- A client that hangs up while the app holds its request is seen by the app (the gate reads
  on while it holds a connection's bytes back from uvicorn).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import httpx
import pytest
from anyio.abc import SocketStream
from starlette.types import Receive, Scope, Send
from structlog.testing import capture_logs

from plumbing.http.gate import ConnectionGate
from plumbing.http.server import QuietServer, loopback_config

DEADLINE_S = 0.3
CLOSED_WITHIN_S = 5.0
#: One answer of `/big`: a few of them fill the socket's buffers on loopback.
BIG_BYTES = 1 << 20


class _InTest(QuietServer):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals belong to the test runner


class App:
    """Answers `ok`; `/slow` waits for `release` first; `/body` reads its body; `/wait` waits
    for the client to hang up."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.in_app = 0
        self.disconnects = 0
        self.hung_up = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        if scope["path"] == "/big":
            body = b"x" * BIG_BYTES
            headers = [(b"content-length", str(BIG_BYTES).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["path"] == "/wait":
            self.in_app += 1
            while (await receive())["type"] != "http.disconnect":
                pass
            self.hung_up.set()
            return
        if scope["path"] == "/slow":
            self.in_app += 1
            await self.release.wait()
        if scope["path"] == "/body":
            while (message := await receive())["type"] == "http.request":
                if not message.get("more_body"):
                    break
            else:
                self.disconnects += 1
                return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def serving(gate: ConnectionGate, app: App) -> AsyncIterator[int]:
    server = _InTest(loopback_config(app, gate, host="127.0.0.1", port=0, lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield server.servers[0].sockets[0].getsockname()[1]
        finally:
            app.release.set()
            server.request_stop()


async def closed_by_server(stream: SocketStream) -> bool:
    """True once the server closes `stream` (end of file or reset), within the bound."""
    with anyio.fail_after(CLOSED_WITHIN_S):
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
            return True


async def get(port: int, path: str = "/", client: httpx.AsyncClient | None = None) -> int:
    if client is not None:
        return (await client.get(f"http://127.0.0.1:{port}{path}")).status_code
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as fresh:
        return (await fresh.get(f"http://127.0.0.1:{port}{path}")).status_code


@pytest.mark.parametrize(
    "sent",
    [b"", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1", b"POST /body HTTP/1.1\r\n"
     b"Host: 127.0.0.1\r\nContent-Length: 100\r\n\r\nonly ten b"],
    ids=["nothing", "half the headers", "half the body"],
)  # fmt: skip
async def test_a_request_not_complete_by_the_deadline_is_closed(sent: bytes) -> None:
    app = App()
    gate = ConnectionGate(max_connections=10, request_deadline_s=DEADLINE_S)
    async with serving(gate, app) as port, await anyio.connect_tcp("127.0.0.1", port) as stream:
        if sent:
            await stream.send(sent)
        assert await closed_by_server(stream)
    assert gate.shed["timed_out"] == 1


async def test_at_the_cap_a_newcomer_takes_the_place_of_the_longest_quiet() -> None:
    app = App()
    gate = ConnectionGate(max_connections=3, request_deadline_s=60.0)
    async with serving(gate, app) as port:
        idle = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(2)]
        async with httpx.AsyncClient(trust_env=False, timeout=5.0) as kept:
            assert await get(port, client=kept) == 200  # quiet since its answer, after the idle
            assert await get(port) == 200  # the cap is full: the oldest idle one makes room
            assert await closed_by_server(idle[0])
            assert await get(port, client=kept) == 200
        assert gate.shed["evicted"] >= 1
        for stream in idle:
            await stream.aclose()


async def test_a_connection_sending_its_request_is_never_evicted() -> None:
    gate = ConnectionGate(max_connections=2, request_deadline_s=60.0)
    half = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    async with serving(gate, App()) as port:
        sending = await anyio.connect_tcp("127.0.0.1", port)
        await sending.send(half)
        with anyio.fail_after(5):
            while not any(conn.sent for conn in gate.live):
                await anyio.sleep(0.01)
        quiet = await anyio.connect_tcp("127.0.0.1", port)
        assert await get(port) == 200  # at the cap: the quiet one makes room, though younger
        assert await closed_by_server(quiet)
        await sending.send(b"\r\n")
        with anyio.fail_after(5):
            assert (await sending.receive()).startswith(b"HTTP/1.1 200 ")
        await sending.aclose()
        await quiet.aclose()


async def test_when_every_connection_is_sending_a_newcomer_is_closed() -> None:
    gate = ConnectionGate(max_connections=2, request_deadline_s=60.0)
    streams: list[SocketStream] = []
    async with serving(gate, App()) as port:
        for _ in range(2):
            stream = await anyio.connect_tcp("127.0.0.1", port)
            await stream.send(b"GET / HTTP/1.1\r\n")
            streams.append(stream)
        with anyio.fail_after(5):
            while sum(conn.sent for conn in gate.live) < 2:
                await anyio.sleep(0.01)
        async with await anyio.connect_tcp("127.0.0.1", port) as newcomer:
            assert await closed_by_server(newcomer)
        assert gate.shed == {**gate.shed, "refused": 1, "evicted": 0}
        for stream in streams:
            await stream.aclose()


async def test_with_only_kept_alive_connections_idle_a_newcomer_takes_the_longest_idle() -> None:
    gate = ConnectionGate(max_connections=2, request_deadline_s=60.0)
    async with (
        serving(gate, App()) as port,
        httpx.AsyncClient(trust_env=False, timeout=5.0) as first,
        httpx.AsyncClient(trust_env=False, timeout=5.0) as second,
    ):
        assert await get(port, client=first) == 200
        assert await get(port, client=second) == 200
        assert await get(port) == 200  # at the cap: the first client's connection makes room
        assert gate.shed["evicted"] == 1
        assert await get(port, client=first) == 200  # it finds its connection closed: a new one
        assert len(gate.live) <= 2


async def test_when_every_connection_is_in_a_request_a_newcomer_is_closed() -> None:
    app = App()
    gate = ConnectionGate(max_connections=2, request_deadline_s=60.0)
    async with serving(gate, app) as port:
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(get, port, "/slow")
            with anyio.fail_after(5):
                while app.in_app < 2:
                    await anyio.sleep(0.01)
            async with await anyio.connect_tcp("127.0.0.1", port) as newcomer:
                assert await closed_by_server(newcomer)
            assert gate.shed["refused"] == 1
            app.release.set()
        assert await get(port) == 200  # the two answered: there is room again


async def test_every_answer_carries_a_date_header() -> None:
    async with (
        serving(ConnectionGate(), App()) as port,
        httpx.AsyncClient(trust_env=False, timeout=5.0) as client,
    ):
        answer = await client.get(f"http://127.0.0.1:{port}/")
    assert answer.headers["date"].endswith(" GMT")


async def test_a_client_that_hangs_up_while_the_app_waits_is_seen() -> None:
    app = App()
    async with serving(ConnectionGate(), app) as port:
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(b"GET /wait HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            with anyio.fail_after(5):
                while app.in_app < 1:
                    await anyio.sleep(0.01)
        with anyio.fail_after(5):
            await app.hung_up.wait()


async def test_a_quiet_kept_alive_connection_is_closed_without_a_warning() -> None:
    gate = ConnectionGate(max_connections=10, request_deadline_s=DEADLINE_S)
    async with serving(gate, App()) as port, await anyio.connect_tcp("127.0.0.1", port) as kept:
        with capture_logs() as logs:
            await kept.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert await closed_by_server(kept)
        assert gate.shed["idle"] == 1
        assert gate.shed["timed_out"] == 0
        assert [e for e in logs if e["log_level"] == "warning"] == []
        with capture_logs() as logs:
            async with await anyio.connect_tcp("127.0.0.1", port) as never_asked:
                assert await closed_by_server(never_asked)
        assert gate.shed["timed_out"] == 1
        (warning,) = [e for e in logs if e["log_level"] == "warning"]
        assert warning["event"] == "loopback_server.connections_shed"
        assert warning["timed_out"] == 1


async def test_answers_left_unread_past_the_deadline_abort_the_connection() -> None:
    gate = ConnectionGate(max_connections=10, request_deadline_s=DEADLINE_S)
    async with serving(gate, App()) as port, await anyio.connect_tcp("127.0.0.1", port) as reader:
        await reader.send(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 40)
        with anyio.fail_after(CLOSED_WITHIN_S):
            while gate.shed["unread"] < 1:
                await anyio.sleep(0.01)
        assert not gate.live
