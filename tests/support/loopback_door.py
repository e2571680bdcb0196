"""A test door speaking the notify door's contract, on real uvicorn over a Unix socket (as the
door is reached: `plumbing.door`).

    POST /api/coop/engine/notify  X-Coop-Service-Key  {"text", "kind", "outbox_id"}
    POST /api/coop/engine/notify-batch  {"items": [...]}   only with `batch_route=True`: a door
                                  without it answers 404, as an older Chief does

It records every request in arrival order and counts re-sent outbox ids (`ids(db)` and
`resent(db)` read each row's id back from coop.db by its delivery key, the door's
`outbox_id`). A test steers it: `script` answers the next requests (status, headers) in turn;
`down` makes every answer a 503; `delay_s` slows each answer. The default answer is 200
`{"delivered": true, ...}`.

`serve_door(door, sock)` serves it on an already bound socket (`bound_socket(path)`, 0600 in the
test's own folder, so a client's `check_private` passes): a bound socket that is not yet
listening refuses connections, so a test can start with "the door is down" at a fixed socket and
bring it up later on the same one.

As a process (the benches' minimal door, to measure the notifier alone; `tests.support.stack`
starts it), it logs every accepted row as a JSON line with its receipt time, as the Telegram
emulator's `--log` does, and says on stdout that it listens, as the project's services do:

    python -m tests.support.loopback_door --key KEY --log LOG_PATH [--socket PATH]
    {"event": "test_door.listening", "socket": "/path/to/door.sock"}

`--socket` defaults to the door's own (`COOP_DOOR_SOCKET`, else `<COOP_HOME>/door.sock`), where
the notifier of the same folder looks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from plumbing import door as door_address
from tests.support.waiting import wait_until, wait_until_sync

DOOR_PATH = "/api/coop/engine/notify"
BATCH_PATH = DOOR_PATH + "-batch"
SERVICE_KEY = "test-service-key-0123456789"
STOP_TIMEOUT_S = 10.0


def row_ids(db: Path | str, keys: list[str]) -> list[int]:
    """The coop.db row ids of these delivery keys (the door's `outbox_id`s), in order."""
    with closing(sqlite3.connect(db, timeout=STOP_TIMEOUT_S)) as conn:
        known = dict(conn.execute("SELECT delivery_key, id FROM coop_outbox").fetchall())
    unknown = [key for key in keys if key not in known]
    assert not unknown, f"outbox ids {unknown} name no row of {db}"
    return [int(known[key]) for key in keys]


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, object] | None = None
    raw: bytes | None = None  # a body that is not JSON (a malformed answer)


@dataclass
class TestDoor:
    __test__ = False  # not a test class, despite the name

    received: list[dict[str, str]] = field(default_factory=list)
    script: list[Answer] = field(default_factory=list)
    down: bool = False
    delay_s: float = 0.0
    wrong_keys: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    key: str = SERVICE_KEY
    log: TextIO | None = None  # accepted rows as JSON lines {"text", "received_at"}
    batch_route: bool = False
    batches: int = 0  # batch requests accepted

    async def handle_batch(self, request: Request) -> Response:
        """The batch route: the whole request answered as one (`script`, `down`), each row
        recorded as the single route records it."""
        if request.headers.get("x-coop-service-key") != self.key:
            self.wrong_keys += 1
            return JSONResponse({"detail": "unauthorized"}, status_code=401)
        items = json.loads(await request.body())["items"]
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        with self.lock:
            answer = self.script.pop(0) if self.script else None
            if answer is None and self.down:
                answer = Answer(503, body={"detail": "chief_unavailable"})
            if answer is None:
                self.batches += 1
                now = time.time()
                for item in items:
                    self.received.append(item)
                    if self.log is not None:
                        record = {"text": item["text"], "received_at": now}
                        self.log.write(json.dumps(record) + "\n")
        if answer is None:
            return JSONResponse(
                {"items": [{"delivered": True, "outbox_id": i["outbox_id"]} for i in items]}
            )
        return JSONResponse(
            answer.body if answer.body is not None else {"detail": "scripted"},
            status_code=answer.status,
            headers=answer.headers,
        )

    def keys(self) -> list[str]:
        """The `outbox_id` of every row received, in arrival order: the rows' delivery keys."""
        with self.lock:
            return [r["outbox_id"] for r in self.received]

    def ids(self, db: Path | str) -> list[int]:
        """The coop.db row id of every row received, in arrival order (its key looked up)."""
        return row_ids(db, self.keys())

    def resent(self, db: Path | str) -> dict[int, int]:
        """outbox id -> times seen, for ids seen more than once."""
        counts = Counter(self.ids(db))
        return {i: n for i, n in counts.items() if n > 1}

    async def handle(self, request: Request) -> Response:
        if request.headers.get("x-coop-service-key") != self.key:
            self.wrong_keys += 1
            return JSONResponse({"detail": "unauthorized"}, status_code=401)
        body = json.loads(await request.body())
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        with self.lock:
            answer = self.script.pop(0) if self.script else None
            if answer is None and self.down:
                answer = Answer(503, body={"detail": "notification_channel_unavailable"})
            if answer is None or 200 <= answer.status < 300:
                self.received.append(body)
                if self.log is not None:
                    record = {"text": body["text"], "received_at": time.time()}
                    self.log.write(json.dumps(record) + "\n")
        if answer is not None and answer.raw is not None:
            return Response(answer.raw, status_code=answer.status, headers=answer.headers)
        if answer is None:
            return JSONResponse({"delivered": True, "outbox_id": body.get("outbox_id")})
        return JSONResponse(
            answer.body if answer.body is not None else {"detail": "scripted"},
            status_code=answer.status,
            headers=answer.headers,
        )

    def app(self) -> Starlette:
        routes = [Route(DOOR_PATH, self.handle, methods=["POST"])]
        if self.batch_route:
            routes.append(Route(BATCH_PATH, self.handle_batch, methods=["POST"]))
        return Starlette(routes=routes)


def bound_socket(path: Path | str) -> socket.socket:
    """A Unix socket bound at `path` (mode 0600), not listening yet (connections to it are
    refused, as to a door that is down). `path`'s folder must be the caller's and private to
    writes, as a client checks (`plumbing.unix.check_private`)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the mode at bind: chmod afterwards would leave a window
    try:
        sock.bind(str(path))
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    return sock


def door_socket(sock: socket.socket) -> str:
    """The path `sock` is bound at: where a client reaches the test door."""
    return str(sock.getsockname())


def _server(door: TestDoor) -> uvicorn.Server:
    config = uvicorn.Config(
        door.app(), log_config=None, access_log=False, lifespan="off", ws="none"
    )
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    return server


@asynccontextmanager
async def serve_door(door: TestDoor, sock: socket.socket) -> AsyncIterator[str]:
    """Serve `door` on `sock` in this event loop; yield its socket's path."""
    server = _server(door)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_until(lambda: server.started or task.done(), what="test door start")
        if task.done():
            task.result()
        yield door_socket(sock)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=STOP_TIMEOUT_S)


@contextmanager
def serve_door_in_thread(door: TestDoor, path: Path | str) -> Iterator[str]:
    """Serve `door` at the socket `path` on its own loop in a thread (for tests driving real
    processes); yield the socket's path. The socket file is removed when it stops."""
    sock = bound_socket(path)
    server = _server(door)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="test-door", daemon=True
    )
    thread.start()
    try:
        wait_until_sync(lambda: server.started or not thread.is_alive(), what="test door start")
        assert server.started, "the test door did not start"
        yield door_socket(sock)
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT_S)
        sock.close()
        Path(path).unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    """Serve until SIGTERM, with the batch route (the notifier's default sends batches)."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.loopback_door")
    parser.add_argument("--key", required=True, help="the service key it accepts")
    parser.add_argument("--log", type=Path, required=True, help="accepted rows, JSON lines")
    parser.add_argument(
        "--socket", type=Path, help="default: the door's, <COOP_HOME>/door.sock (logged)"
    )
    args = parser.parse_args(argv)
    path = args.socket or Path(door_address.socket_path(os.environ))
    path.unlink(missing_ok=True)  # a previous start's, in the test's own folder
    sock = bound_socket(path)
    with args.log.open("a", buffering=1) as log:
        door = TestDoor(key=args.key, log=log, batch_route=True)
        config = uvicorn.Config(door.app(), log_level="warning", access_log=False, lifespan="off")
        server = uvicorn.Server(config)
        # Listening before it says so: a peer told the socket finds it listening (the backlog holds
        # a connection until uvicorn accepts it).
        sock.listen(128)
        print(json.dumps({"event": "test_door.listening", "socket": str(path)}), flush=True)
        asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main(sys.argv[1:])
