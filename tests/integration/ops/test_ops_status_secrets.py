"""`coop status` and the service key: read only through the 0600 check, and sent to the door
directly, never through a proxy the environment names (real CLI processes, real door)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chief.config import ChiefConfig
from chief.door.app import create_app
from chief.door.config import DoorConfig
from tests.support.asgi import serve_asgi_in_thread
from tests.support.procs import coop
from tests.support.proxy import ProxyTrap, proxy_trap


@pytest.fixture
def door(home: Path) -> Iterator[str]:
    env = {
        "COOP_HOME": str(home),
        "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
        "CHIEF_OWNER": "owner",
        "CHIEF_PORT": "0",
    }
    app = create_app(DoorConfig.from_env(env), ChiefConfig.from_env(env))
    with serve_asgi_in_thread(app) as base_url:
        yield base_url + "/api/coop/engine/notify"


@pytest.fixture
def trap() -> Iterator[ProxyTrap]:
    with proxy_trap() as trap:
        yield trap


def test_status_asks_the_door_directly_whatever_proxy_the_environment_names(
    home: Path, door: str, trap: ProxyTrap
) -> None:
    env = {"COOP_HOME": str(home), "COOP_DOOR_URL": door, **trap.environ()}

    result = coop("status", "--check", env=env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "door: answering" in result.stdout
    assert not trap.knocked(), "the service key went to the proxy"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_status_refuses_a_service_key_others_can_read_and_sends_nothing(
    home: Path, mode: int
) -> None:
    (home / "service.key").chmod(mode)
    with proxy_trap() as door_spot:  # stands where the door would be: it must hear nothing
        url = door_spot.url + "/api/coop/engine/notify"

        result = coop("status", "--check", env={"COOP_HOME": str(home), "COOP_DOOR_URL": url})

        assert not door_spot.knocked(), "a key others can read was sent"
    assert result.returncode == 1
    assert "must be private (0600)" in result.stdout
    assert "needs a person: the door did not answer" in result.stdout
