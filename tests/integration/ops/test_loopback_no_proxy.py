"""No call to a loopback service follows a proxy the environment names: the notifier's door
client, the Telegram sender pointed at the local Bot API emulator, and the owner's compatibility
client (see tests/integration/owner/test_owner_no_proxy.py). A listener stands where every proxy
variable points, and must hear nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chief.telegram.emulator import create_emulator
from chief.telegram.sender import build_sender
from notifier.client import HttpDoorClient
from notifier.delivery import OutboxRow
from tests.support.asgi import serve_asgi
from tests.support.loopback_door import SERVICE_KEY, TestDoor, bound_socket, serve_door
from tests.support.proxy import ProxyTrap, proxy_trap

TOKEN = "123:loopback"


@pytest.fixture
def trap(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProxyTrap]:
    with proxy_trap() as trap:
        for name, value in trap.environ().items():
            monkeypatch.setenv(name, value)
        yield trap


async def test_the_notifier_posts_to_the_door_directly(trap: ProxyTrap, tmp_path: Path) -> None:
    door = TestDoor()
    sock = bound_socket(tmp_path / "door.sock")
    try:
        async with serve_door(door, sock) as path:
            client = HttpDoorClient(path, SERVICE_KEY, timeout_s=5.0)
            try:
                reply = await client.send(OutboxRow(1, "note", "tea is ready", 0, 0.0, "d-tea"))
            finally:
                await client.aclose()
    finally:
        sock.close()

    assert reply.status == 200, reply
    assert door.keys() == ["d-tea"]
    assert not trap.knocked(), "the door call went to the proxy"


async def test_the_telegram_sender_reaches_the_local_emulator_directly(trap: ProxyTrap) -> None:
    app, state = create_emulator(token=TOKEN)
    async with serve_asgi(app) as base_url:
        sender = build_sender(TOKEN, "5", base_url=base_url + "/bot", timeout_s=3.0)
        assert sender is not None
        await sender.start()
        try:
            await sender.send("todo #1 done")
        finally:
            await sender.aclose()

    assert state.texts() == ["todo #1 done"]
    assert not trap.knocked(), "the Bot API call to loopback went to the proxy"
