"""Flow control on the connection gate: a connection whose answers are unread is not read
further, so one client cannot swell a service.

One keyless connection pipelines requests as fast as the server takes them and never reads an
answer, against a real uvicorn on the gate in its own process (`tests.support.gated_server`),
over TCP and over a Unix socket, on a 404 path (the door's answer to a stranger) and on a JSON
POST (the engine service's shape). The server's resident memory, read from /proc, grows by at
most `GROWTH_BOUND_MB`, and it still answers another client afterwards.

Without flow control the server grew by 80 to 200 MB a second here (uvicorn on httptools parsed
every request the socket held and queued them all, and resumed reading whenever an answer was
written, however full the write buffer), so `PIPELINE_S` of 5 s is the short run that still
proves it: a bounded server has stopped reading within the first second.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support.procs import child_env, memory_kb

pytestmark = pytest.mark.slow

PIPELINE_S = 5.0
GROWTH_BOUND_MB = 10.0
START_TIMEOUT_S = 30.0

_BODY = json.dumps({"verb": "list", "args": {"state": "open", "limit": 50}}).encode()
REQUESTS = {
    "404": b"GET /nowhere HTTP/1.1\r\nHost: coop\r\n\r\n",
    "json": b"POST /json HTTP/1.1\r\nHost: coop\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(_BODY), _BODY),
}
STATUS = {"404": b"HTTP/1.1 404 ", "json": b"HTTP/1.1 200 "}


@contextmanager
def gated_server(where: str, *options: str) -> Iterator[tuple[int, str]]:
    """The server process and its address (a port, or a socket path)."""
    folder = tempfile.mkdtemp(prefix="gate-")
    args = ["--tcp"] if where == "tcp" else ["--unix", os.path.join(folder, "s.sock")]
    args.extend(options)
    with subprocess.Popen(
        [sys.executable, "-m", "tests.support.gated_server", *args],
        stdout=subprocess.PIPE,
        env=child_env(),
        text=True,
    ) as server:
        try:
            assert server.stdout is not None
            ready, _, _ = select.select([server.stdout], [], [], START_TIMEOUT_S)
            assert ready, "the gated server did not start"
            yield server.pid, server.stdout.readline().split()[1]
        finally:
            server.terminate()
            server.wait(timeout=30)
            shutil.rmtree(folder, ignore_errors=True)


def connect(where: str, address: str) -> socket.socket:
    if where == "tcp":
        return socket.create_connection(("127.0.0.1", int(address)))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    return sock


def rss_mb(pid: int) -> float:
    return memory_kb(pid)["VmRSS"] / 1024


def asker(where: str, address: str) -> httpx.Client:
    if where == "tcp":
        return httpx.Client(base_url=f"http://127.0.0.1:{address}", timeout=10.0, trust_env=False)
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=address), base_url="http://coop", timeout=10.0
    )


@pytest.mark.parametrize("path", ["404", "json"])
@pytest.mark.parametrize("where", ["tcp", "unix"])
def test_a_client_that_never_reads_its_answers_does_not_swell_the_server(
    where: str, path: str
) -> None:
    request = REQUESTS[path]
    # A long deadline: the gate would abort the connection once its answers sat unread for it,
    # and this test reads the first answer at the end.
    with gated_server(where, "--deadline-s=60") as (pid, address), asker(where, address) as other:
        for _ in range(20):  # warm: the path's code loaded, its first allocations made
            answer = other.post("/json", json={"a": 1}) if path == "json" else other.get("/x")
            assert answer.status_code in (200, 404)
        before = rss_mb(pid)
        growth = 0.0
        sent = 0
        with connect(where, address) as flood:
            flood.settimeout(0.1)
            batch = request * 100
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < PIPELINE_S and growth <= GROWTH_BOUND_MB:
                with contextlib.suppress(TimeoutError):  # the server stopped reading
                    sent += flood.send(batch)
                growth = max(growth, rss_mb(pid) - before)
            assert sent > 10 * len(batch)  # it did send a flood before it was held
            flood.settimeout(5)
            assert flood.recv(len(STATUS[path])) == STATUS[path]  # answered in order
            assert growth <= GROWTH_BOUND_MB, f"grew {growth:.0f} MB in {elapsed:.1f} s"
            assert other.get("/ok").text == "ok"  # the server serves others meanwhile
