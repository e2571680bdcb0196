"""Whatever a client pipelines, cut wherever its bytes are cut, the gate's flow control hands
uvicorn every byte once and in order: each request is answered, in the order sent.

A property over the request stream: a mix of GETs, 404s and JSON POSTs of any size, sent in
chunks cut at any points (so a chunk ends mid-header, mid-body, or holds many requests), over
one connection to a real uvicorn on the gate in its own process (`tests.support.gated_server`),
over TCP and over a Unix socket. The answers are read only after everything is sent, so the
gate holds bytes back while answers wait, and must then hand them on whole.
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.http.test_gate_flow_control import connect, gated_server

ANSWER_TIMEOUT_S = 10.0

Request = tuple[str, int, int]  # kind, number, padding
_REQUESTS = st.lists(
    st.tuples(st.sampled_from(["ok", "404", "json"]), st.integers(0, 10**6), st.integers(0, 3000)),
    min_size=1,
    max_size=25,
)


def encode(request: Request) -> bytes:
    kind, number, padding = request
    if kind == "ok":
        return b"GET /ok HTTP/1.1\r\nHost: coop\r\n\r\n"
    if kind == "404":
        return b"GET /nowhere HTTP/1.1\r\nHost: coop\r\n\r\n"
    body = json.dumps({"n": number, "pad": "x" * padding}).encode()
    head = b"POST /json HTTP/1.1\r\nHost: coop\r\nContent-Type: application/json\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


def expected(request: Request) -> tuple[int, object]:
    kind, number, _ = request
    return {"ok": (200, "ok"), "404": (404, "Not Found"), "json": (200, number)}[kind]


def read_answers(sock: socket.socket, count: int) -> list[tuple[int, object]]:
    """`count` answers off the stream: each its status and its body (`n` for a JSON echo)."""
    buffer = b""
    answers: list[tuple[int, object]] = []
    while len(answers) < count:
        head_end = buffer.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buffer[:head_end].decode("latin-1").split("\r\n")
            fields = dict(line.lower().split(": ", 1) for line in head[1:])
            end = head_end + 4 + int(fields["content-length"])
            if len(buffer) >= end:
                body = buffer[head_end + 4 : end]
                value = json.loads(body)["echo"]["n"] if body.startswith(b"{") else body.decode()
                answers.append((int(head[0].split()[1]), value))
                buffer = buffer[end:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"closed after {len(answers)} of {count} answers"
        buffer += chunk
    return answers


@pytest.fixture(scope="module", params=["tcp", "unix"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    with gated_server(request.param) as (_, address):
        yield request.param, address


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests=_REQUESTS, cuts=st.lists(st.floats(0, 1), max_size=12))
def test_every_pipelined_request_is_answered_once_in_order(
    server: tuple[str, str], requests: list[Request], cuts: list[float]
) -> None:
    stream = b"".join(encode(request) for request in requests)
    points = sorted({0, len(stream), *(int(cut * len(stream)) for cut in cuts)})
    with connect(*server) as sock:
        sock.settimeout(ANSWER_TIMEOUT_S)
        for start, end in itertools.pairwise(points):
            sock.sendall(stream[start:end])
        answers = read_answers(sock, len(requests))
    assert answers == [expected(request) for request in requests]
