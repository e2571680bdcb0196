"""TELEGRAM_TIMEOUT_S is checked against the engine's client timeout: a Telegram call that may
outlast the engine's patience makes the engine retry a send that is still in flight."""

from __future__ import annotations

from pathlib import Path

import pytest

from chief.door.config import DoorConfig
from chief.errors import DoorError
from tests.support.door import door_env, write_key


@pytest.mark.parametrize(
    ("settings", "ok"),
    [
        ({"TELEGRAM_TIMEOUT_S": "12"}, True),  # 12 + 2 (report wait) + 1 (margin) <= 15
        ({"TELEGRAM_TIMEOUT_S": "13"}, False),
        ({"TELEGRAM_TIMEOUT_S": "60"}, False),
        ({"TELEGRAM_TIMEOUT_S": "5", "COOP_CLIENT_TIMEOUT_S": "6"}, False),
        ({"TELEGRAM_TIMEOUT_S": "20", "COOP_CLIENT_TIMEOUT_S": "30"}, True),
    ],
)
def test_door_telegram_timeout_must_end_before_the_engine_gives_up(
    tmp_path: Path, settings: dict[str, str], ok: bool
) -> None:
    write_key(tmp_path)
    if ok:
        config = DoorConfig.from_env(door_env(tmp_path, **settings))
        assert config.telegram_timeout_s == float(settings["TELEGRAM_TIMEOUT_S"])
        return
    with pytest.raises(DoorError, match="TELEGRAM_TIMEOUT_S") as raised:
        DoorConfig.from_env(door_env(tmp_path, **settings))
    assert "COOP_CLIENT_TIMEOUT_S" in str(raised.value)


def test_door_refuses_an_engine_client_timeout_it_cannot_read(tmp_path: Path) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match="COOP_CLIENT_TIMEOUT_S"):
        DoorConfig.from_env(door_env(tmp_path, COOP_CLIENT_TIMEOUT_S="soon"))


def test_door_quiet_hours_are_off_by_default_and_read_in_the_owners_zone(tmp_path: Path) -> None:
    write_key(tmp_path)
    assert DoorConfig.from_env(door_env(tmp_path)).telegram_quiet_hours is None
    config = DoorConfig.from_env(
        door_env(tmp_path, TELEGRAM_QUIET_HOURS="22:00-07:00", TELEGRAM_QUIET_TZ="Europe/Rome")
    )
    hours = config.telegram_quiet_hours
    assert hours is not None
    assert str(hours.zone) == "Europe/Rome"


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"TELEGRAM_QUIET_HOURS": "late"}, "TELEGRAM_QUIET_HOURS"),
        ({"TELEGRAM_QUIET_HOURS": "22:00-07:00", "TELEGRAM_QUIET_TZ": "Mars/Olympus"}, "TZ"),
    ],
)
def test_door_refuses_quiet_hours_it_cannot_read(
    tmp_path: Path, settings: dict[str, str], named: str
) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match=named):
        DoorConfig.from_env(door_env(tmp_path, **settings))


def test_door_notify_batch_max_defaults_to_64_and_reads_the_setting(tmp_path: Path) -> None:
    write_key(tmp_path)
    assert DoorConfig.from_env(door_env(tmp_path)).notify_batch_max == 64
    config = DoorConfig.from_env(door_env(tmp_path, CHIEF_NOTIFY_BATCH_MAX=" 8 "))
    assert config.notify_batch_max == 8


@pytest.mark.parametrize("raw", ["0", "-1", "257", "eight", "", "8.5"])
def test_door_refuses_a_notify_batch_max_out_of_range(tmp_path: Path, raw: str) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match=r"CHIEF_NOTIFY_BATCH_MAX=.* 1\.\.256"):
        DoorConfig.from_env(door_env(tmp_path, CHIEF_NOTIFY_BATCH_MAX=raw))


def test_door_notify_body_max_is_unset_by_default_and_reads_the_setting(tmp_path: Path) -> None:
    write_key(tmp_path)
    assert DoorConfig.from_env(door_env(tmp_path)).notify_body_max_bytes is None
    config = DoorConfig.from_env(door_env(tmp_path, CHIEF_NOTIFY_BODY_MAX_BYTES=" 4096 "))
    assert config.notify_body_max_bytes == 4096


@pytest.mark.parametrize("raw", ["0", "1023", str(16 * 1024 * 1024 + 1), "4k", "8.5"])
def test_door_refuses_a_notify_body_max_out_of_range(tmp_path: Path, raw: str) -> None:
    write_key(tmp_path)
    with pytest.raises(DoorError, match=r"CHIEF_NOTIFY_BODY_MAX_BYTES=.* 1024\.\.16777216"):
        DoorConfig.from_env(door_env(tmp_path, CHIEF_NOTIFY_BODY_MAX_BYTES=raw))
