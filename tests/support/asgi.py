"""Run any ASGI app on a real uvicorn at 127.0.0.1 (or ::1), port 0, inside a test.

    async with serve_asgi(app) as base_url: ...          # in the test's event loop
    with serve_asgi_in_thread(app) as base_url: ...      # sync tests: its own loop in a thread
    with serve_asgi_in_thread(app, uds=path) as path: ...  # on a private Unix socket instead

Both wait (bounded) until the socket listens, yield `http://host:port`, and on exit ask uvicorn
to stop and wait (bounded) for it, so no server outlives its test. Given `sock` (a Unix socket
already bound and listening, as `plumbing.unix.bind_private` makes one), the app is served there
instead, and the URL yielded is `http://localhost` (a client reaches it through the socket).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import uvicorn
from starlette.types import ASGIApp

from plumbing import unix
from tests.support.waiting import wait_until, wait_until_sync

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class _TestServer(uvicorn.Server):
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        # Signals belong to the test runner, not to a server living inside a test.
        yield


def _server(app: ASGIApp, host: str, lifespan: str) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=0,
        log_config=None,
        access_log=False,
        lifespan=lifespan,
        ws="none",
        timeout_graceful_shutdown=int(STOP_TIMEOUT_S / 2),
    )
    return _TestServer(config)


def _base_url(server: uvicorn.Server, host: str) -> str:
    if server.servers[0].sockets[0].family == socket.AF_UNIX:
        return "http://localhost"
    port = server.servers[0].sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


@asynccontextmanager
async def serve_asgi(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    lifespan: str = "auto",
    sock: socket.socket | None = None,
) -> AsyncIterator[str]:
    """Serve `app` in the current event loop (on `sock` if given); yield its base URL."""
    server = _server(app, host, lifespan)
    task = asyncio.create_task(server.serve(sockets=None if sock is None else [sock]))
    try:
        await wait_until(
            lambda: server.started or task.done(), timeout_s=START_TIMEOUT_S, what="uvicorn start"
        )
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started listening")
        yield _base_url(server, host)
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, timeout=STOP_TIMEOUT_S)
        except TimeoutError:
            server.force_exit = True
            await asyncio.wait_for(task, timeout=STOP_TIMEOUT_S)


@contextmanager
def serve_asgi_in_thread(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    lifespan: str = "auto",
    sock: socket.socket | None = None,
    uds: str | None = None,
) -> Iterator[str]:
    """Serve `app` on its own event loop in a background thread; yield its base URL (on `sock`
    if given; with `uds`: on that Unix socket, bound as a service binds it,
    `plumbing.unix.bind_private`, and yield its path)."""
    server = _server(app, host, lifespan)
    errors: list[BaseException] = []
    sockets = [unix.bind_private(uds)] if uds is not None else None
    if sock is not None:
        sockets = [sock]

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=sockets))
        except BaseException as exc:  # reported to the test below, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="asgi-test-server", daemon=True)
    thread.start()
    try:
        wait_until_sync(
            lambda: server.started or not thread.is_alive(),
            timeout_s=START_TIMEOUT_S,
            what="uvicorn start",
        )
        if not server.started:
            raise RuntimeError(f"uvicorn did not start: {errors!r}")
        yield uds if uds is not None else _base_url(server, host)
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT_S)
        if thread.is_alive():
            server.force_exit = True
            thread.join(STOP_TIMEOUT_S)
        for sock in sockets or ():
            sock.close()
        if uds is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(uds)
