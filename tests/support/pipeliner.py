"""A client that pipelines requests and never reads an answer, in its own process, as a stranger
that holds no key would send them: bounded in time.

    python -m tests.support.pipeliner (--port PORT | --unix PATH) [--seconds 15]
        [--get PATH ...] [--post-json PATH ...]

Each `--get` and each `--post-json` (a small JSON body) is one connection that sends that
request over and over, as fast as the server takes the bytes, and never reads. A connection the
server closes (it may, once its answers sit unread past its deadline, or at once where it refuses
a keyless request) is opened again after `REOPEN_S`, so the server is pressed for the whole run
by pipelined requests rather than by a churn of new connections (the churn is
`tests.support.gate_flood`'s, with its own proof). It prints one line when it stops,
`pipelined bytes=N connections=M`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import time

BODY = json.dumps({"verb": "list", "args": {"state": "open", "limit": 50}}).encode()
#: Requests written per send: the socket takes what it can of them.
BATCH = 100
#: How long one wait for the socket to take bytes lasts (the run's end is checked between).
POLL_S = 0.1
#: The least time between two opens of one connection: a refused request closes it at once, and
#: reopening at full speed (about 1,200 a second here) would measure the allocator's high-water
#: mark under connection churn (it levels off near 30 MB on coop serve), not pipelining.
REOPEN_S = 0.05


def request(method: str, path: str) -> bytes:
    """One keyless request: a GET, or a POST carrying `BODY` as JSON."""
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    if method == "GET":
        return (head + "\r\n").encode()
    return (
        head + f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY


class Pipe:
    """One connection sending one request over and over; reopened when the server closes it."""

    def __init__(self, args: argparse.Namespace, payload: bytes) -> None:
        self.args = args
        self.batch = payload * BATCH
        self.sock: socket.socket | None = None
        self.pending = memoryview(b"")
        self.sent = 0
        self.opened = 0
        self.opened_at = -REOPEN_S

    def open(self) -> None:
        self.close()
        if time.monotonic() - self.opened_at < REOPEN_S:
            return  # too soon after the last open: the main loop comes back within POLL_S
        self.opened_at = time.monotonic()
        if self.args.unix:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: object = self.args.unix
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = ("127.0.0.1", self.args.port)
        sock.settimeout(POLL_S * 10)
        try:
            sock.connect(target)  # type: ignore[arg-type]
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self.sock, self.opened = sock, self.opened + 1
        self.pending = memoryview(self.batch)

    def send(self) -> None:
        if self.sock is None:
            self.open()
            return
        try:
            n = self.sock.send(self.pending)
        except BlockingIOError:
            return
        except OSError:  # closed by the server: open again
            self.open()
            return
        self.sent += n
        self.pending = self.pending[n:] or memoryview(self.batch)

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


def pipeline(args: argparse.Namespace) -> tuple[int, int]:
    """Run every connection until `args.seconds` have passed: bytes sent, connections opened."""
    payloads = [request("GET", path) for path in args.get]
    payloads += [request("POST", path) for path in args.post_json]
    pipes = [Pipe(args, payload) for payload in payloads]
    until = time.monotonic() + args.seconds
    for pipe in pipes:
        pipe.open()
    while time.monotonic() < until:
        live = [pipe for pipe in pipes if pipe.sock is not None]
        _, writable, _ = select.select([], [pipe.sock for pipe in live], [], POLL_S)
        for pipe in pipes:
            if pipe.sock is None or pipe.sock in writable:
                pipe.send()
        if not live:
            time.sleep(POLL_S)  # the server is not taking connections: try again shortly
    for pipe in pipes:
        pipe.close()
    return sum(pipe.sent for pipe in pipes), sum(pipe.opened for pipe in pipes)


def main() -> None:
    parser = argparse.ArgumentParser()
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=int)
    where.add_argument("--unix")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--get", action="append", default=[])
    parser.add_argument("--post-json", action="append", default=[])
    args = parser.parse_args()
    sent, opened = pipeline(args)
    print(f"pipelined bytes={sent} connections={opened}", flush=True)


if __name__ == "__main__":
    main()
