"""COOP_SERVICE_SOCKET, where the door's phone asks the ledger service (`coop serve`): its Unix
socket, `<COOP_HOME>/service.sock` unless set, an absolute path; the TCP era's COOP_SERVICE_URL
refused in one line naming what to set instead (a URL's port proved nothing about who answers);
and the door keeps the raw key to present it, beside the digest its guard compares."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from chief.door.config import DoorConfig
from chief.errors import DoorError
from tests.support.door import KEY, door_env, write_key


def test_the_default_is_the_socket_in_the_data_folder_and_the_key_is_kept_beside_its_digest(
    tmp_path: Path,
) -> None:
    write_key(tmp_path)
    config = DoorConfig.from_env(door_env(tmp_path))
    assert config.service_socket == str(tmp_path / "service.sock")
    assert config.service_key == KEY
    assert config.service_key_digest == hashlib.sha256(KEY.encode()).digest()
    assert KEY not in repr(config)


def test_an_absolute_socket_path_is_taken(tmp_path: Path) -> None:
    write_key(tmp_path)
    env = door_env(tmp_path, COOP_SERVICE_SOCKET="/run/coop/service.sock")
    assert DoorConfig.from_env(env).service_socket == "/run/coop/service.sock"


@pytest.mark.parametrize("raw", ["service.sock", "~no-such-user-here/service.sock", "./s"])
def test_a_relative_socket_path_is_refused_naming_the_setting(tmp_path: Path, raw: str) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match=r"COOP_SERVICE_SOCKET=.* must be an absolute path"):
        DoorConfig.from_env(door_env(tmp_path, COOP_SERVICE_SOCKET=raw))


@pytest.mark.parametrize("raw", ["http://127.0.0.1:8764", "http://localhost:8764", " x "])
def test_the_tcp_eras_service_url_is_refused_in_one_line_naming_what_to_set(
    tmp_path: Path, raw: str
) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError) as raised:
        DoorConfig.from_env(door_env(tmp_path, COOP_SERVICE_URL=raw))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("COOP_SERVICE_URL is no longer read")
    assert "set COOP_SERVICE_SOCKET" in message
