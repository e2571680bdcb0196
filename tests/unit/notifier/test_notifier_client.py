"""The door client: the request it sends, and every httpx failure translated into a reply."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import httpx
import pytest

from notifier.client import (
    SERVICE_KEY_HEADER,
    FakeDoorClient,
    HttpDoorClient,
    connection_refused,
)
from notifier.delivery import OutboxRow
from notifier.outcome import DoorReply
from plumbing.unix import bind_private

# The door is sent the row's delivery key as its outbox_id, never the row id.
KEY = "d-00112233445566778899aabbccddeeff"
ROW = OutboxRow(
    id=41, kind="note", text="todo #12 done", attempts=0, next_attempt_at=0.0, delivery_key=KEY
)
URL = "http://127.0.0.1:8765/api/coop/engine/notify"


def _leaf_transport_errors() -> list[type[httpx.TransportError]]:
    found: list[type[httpx.TransportError]] = []
    todo: list[type[httpx.TransportError]] = [httpx.TransportError]
    while todo:
        cls = todo.pop()
        subs = cls.__subclasses__()
        if not subs:
            found.append(cls)
        todo.extend(subs)
    return found


async def test_the_request_carries_the_key_and_exactly_the_doors_fields() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"delivered": True}, headers={"Retry-After": "1"})

    client = HttpDoorClient(URL, "k3y", 15.0, transport=httpx.MockTransport(answer))
    reply = await client.send(ROW)
    await client.aclose()
    assert reply == DoorReply(status=200, body=b'{"delivered":true}', retry_after="1", phrase="OK")
    assert seen[0].headers[SERVICE_KEY_HEADER] == "k3y"
    assert json.loads(seen[0].content) == {
        "text": "todo #12 done",
        "kind": "note",
        "outbox_id": KEY,
    }


@pytest.mark.parametrize("error", _leaf_transport_errors(), ids=lambda c: c.__name__)
async def test_every_transport_error_becomes_a_reply_never_an_exception(
    error: type[httpx.TransportError],
) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error("boom", request=request)

    client = HttpDoorClient(URL, "k3y", 15.0, transport=httpx.MockTransport(fail))
    reply = await client.send(ROW)
    await client.aclose()
    assert reply.status is None
    assert reply.error
    # Only a connect that the peer refused is a refused connection (retried soon); a bare
    # ConnectError says nothing of why.
    assert not reply.refused_connection
    if issubclass(error, httpx.TimeoutException):
        assert reply.error.startswith("timeout after 15s")


async def test_a_socket_nobody_holds_or_none_is_the_door_not_running(tmp_path: Path) -> None:
    path = tmp_path / "door.sock"
    replies = []
    for bound in (True, False):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            if bound:
                sock.bind(str(path))  # bound, not listening: the kernel refuses a connect
            client = HttpDoorClient(str(path), "k3y", 15.0)
            try:
                replies += [await client.send(ROW), await client.send_batch([ROW, ROW])]
            finally:
                await client.aclose()
        path.unlink(missing_ok=True)
    for reply in replies:
        assert (reply.status, reply.refused_connection) == (None, True)
        assert reply.error == f"the door is not running: nothing listens at {path}"


def test_a_refusal_is_recognised_through_httpx_httpcore_and_anyio_wrapping() -> None:
    def wrapped(cause: BaseException) -> httpx.ConnectError:
        try:
            try:
                raise OSError("All connection attempts failed") from cause
            except OSError as inner:
                raise httpx.ConnectError("All connection attempts failed") from inner
        except httpx.ConnectError as outer:
            return outer

    refused = ConnectionRefusedError(111, "Connection refused")
    assert connection_refused(wrapped(refused))
    assert connection_refused(wrapped(ExceptionGroup("two addresses", [refused, refused])))
    unreachable = OSError(113, "No route to host")
    assert not connection_refused(wrapped(unreachable))
    assert not connection_refused(wrapped(ExceptionGroup("mixed", [refused, unreachable])))
    assert not connection_refused(httpx.ConnectError("name does not resolve"))


async def test_the_fake_door_records_what_it_was_sent() -> None:
    fake = FakeDoorClient(lambda row: DoorReply(status=503))
    assert (await fake.send(ROW)).status == 503
    await fake.aclose()
    assert fake.sent == [{"text": "todo #12 done", "kind": "note", "outbox_id": KEY}]
    assert fake.closed


def _read_request(conn: socket.socket) -> bytes:
    """One whole request off `conn` (its headers, then its Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += conn.recv(65536)
    return head


def _door_that_drops_its_kept_alive_connection(server: socket.socket) -> None:
    """Answers the first request and keeps the connection; drops it when the next request comes
    on it (as a server that closes an idle kept-alive connection just as the client reuses it);
    answers on a new connection."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 18\r\n\r\n"
    answer += b'{"delivered":true}'
    kept, _ = server.accept()
    with kept:
        _read_request(kept)
        kept.sendall(answer)
        _read_request(kept)
    fresh, _ = server.accept()
    with fresh:
        _read_request(fresh)
        fresh.sendall(answer)


async def test_a_kept_alive_connection_dropped_as_it_is_reused_is_retried_once(
    tmp_path: Path,
) -> None:
    """The door may close a kept-alive connection that sat idle (its connection gate gives the
    place of the connection quiet longest to a newcomer at its cap) at the very moment the
    notifier sends on it: the row goes again on a new connection (the door deduplicates by its
    outbox_id), never deferred for it. Beside a flood this deferred a row with `ReadError`."""
    tmp_path.chmod(0o700)
    path = str(tmp_path / "door.sock")
    server = bind_private(path)
    server.settimeout(10)  # a client that never comes back ends the thread (socket.timeout)
    serving = threading.Thread(
        target=_door_that_drops_its_kept_alive_connection, args=(server,), daemon=True
    )
    serving.start()
    client = HttpDoorClient(path, "k3y", 5.0)
    try:
        replies = [await client.send(ROW), await client.send(ROW)]
    finally:
        await client.aclose()
        serving.join(timeout=10)
        server.close()
    assert [(reply.status, reply.error) for reply in replies] == [(200, None), (200, None)]
