"""COOP_SERVICE_URL, where the door's phone asks the ledger service (`coop serve`): loopback
http only (the service key travels with every call), a port in range, a base URL; and the door
keeps the raw key to present it, beside the digest its guard compares."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from chief.door.config import DEFAULT_SERVICE_URL, DoorConfig
from chief.errors import DoorError
from tests.support.door import KEY, door_env, write_key


def test_the_default_is_coop_serves_default_and_the_key_is_kept_beside_its_digest(
    tmp_path: Path,
) -> None:
    write_key(tmp_path)
    config = DoorConfig.from_env(door_env(tmp_path))
    assert config.service_url == DEFAULT_SERVICE_URL == "http://127.0.0.1:8764"
    assert config.service_key == KEY
    assert config.service_key_digest == hashlib.sha256(KEY.encode()).digest()
    assert KEY not in repr(config)


@pytest.mark.parametrize(
    ("raw", "url"),
    [
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("http://localhost:9000/", "http://localhost:9000"),
        ("http://[::1]:9000", "http://[::1]:9000"),
        (" ", DEFAULT_SERVICE_URL),
    ],
)
def test_a_loopback_service_url_is_taken(tmp_path: Path, raw: str, url: str) -> None:
    write_key(tmp_path)
    assert DoorConfig.from_env(door_env(tmp_path, COOP_SERVICE_URL=raw)).service_url == url


@pytest.mark.parametrize(
    "raw",
    [
        "http://192.0.2.1:8764",
        "http://example.com:8764",
        "https://127.0.0.1:8764",
        "ftp://127.0.0.1:8764",
        "127.0.0.1:8764",
        "http://127.0.0.1:0",
        "http://127.0.0.1:70000",
        "http://127.0.0.1:8764/api",
        "http://user:pw@127.0.0.1:8764",
    ],
)
def test_anything_else_is_refused_naming_the_setting(tmp_path: Path, raw: str) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match="COOP_SERVICE_URL") as raised:
        DoorConfig.from_env(door_env(tmp_path, COOP_SERVICE_URL=raw))
    assert "\n" not in str(raised.value)
