"""`coop status` and the service key: read only through the 0600 check, and sent to the door
directly on its socket, never through a proxy the environment names (real CLI processes, real
door)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from plumbing.unix import bind_private
from tests.integration.ops.conftest import door_on_socket, made_ledger
from tests.support.procs import coop
from tests.support.proxy import ProxyTrap, proxy_trap


@pytest.fixture
def door(home: Path) -> Iterator[str]:
    env = {
        "COOP_HOME": str(home),
        "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
        "CHIEF_OWNER": "owner",
        "CHIEF_METRICS_PORT": "off",
    }
    app = create_app(DoorConfig.from_env(env), ChiefConfig.from_env(env))
    with door_on_socket(app, home / "door.sock") as path:
        yield path


@pytest.fixture
def trap() -> Iterator[ProxyTrap]:
    with proxy_trap() as trap:
        yield trap


def test_status_asks_the_door_directly_whatever_proxy_the_environment_names(
    home: Path, door: str, trap: ProxyTrap
) -> None:
    env = {"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door, **trap.environ()}

    made_ledger(home)
    result = coop("status", "--check", env=env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "door: answering" in result.stdout
    assert not trap.knocked(), "the service key went to the proxy"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_status_refuses_a_service_key_others_can_read_and_sends_nothing(
    home: Path, mode: int
) -> None:
    (home / "service.key").chmod(mode)
    # A listener where the door would be, its socket private: it must hear nothing.
    with contextlib.closing(bind_private(str(home / "door.sock"))) as door_spot:
        door_spot.setblocking(False)

        made_ledger(home)
        result = coop("status", "--check", env={"COOP_HOME": str(home)})

        with pytest.raises(BlockingIOError):  # no connection queued: nothing was sent
            door_spot.accept()
    assert result.returncode == 1
    assert "must be private (0600)" in result.stdout
    assert "needs a person: the door did not answer" in result.stdout
