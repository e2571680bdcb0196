"""Reading the notifier's settings: defaults, wrong values named, the key file's mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from notifier.config import NOTIFY_PATH, NotifierConfig
from notifier.errors import ConfigError, NotifierError, ServiceKeyError


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    key = tmp_path / "service.key"
    key.write_text("s3cret\n")
    key.chmod(0o600)
    return {"COOP_HOME": str(tmp_path)}


def test_defaults_come_from_the_data_folder(env: dict[str, str], tmp_path: Path) -> None:
    config = NotifierConfig.from_env(env)
    assert config.db_path == tmp_path / "coop.db"
    assert config.door_socket == tmp_path / "door.sock"
    assert config.door_url == "http://localhost" + NOTIFY_PATH
    assert config.service_key == "s3cret"
    assert config.service_key_file == tmp_path / "service.key"
    assert (config.client_timeout_s, config.backoff_base_s) == (15.0, 1.0)
    assert (config.backoff_max_s, config.backstop_s) == (300.0, 300.0)
    assert config.batch_max == 64
    assert config.batch_url == "http://localhost" + NOTIFY_PATH + "-batch"
    assert "s3cret" not in repr(config)


def test_settings_are_read_from_the_environment(env: dict[str, str], tmp_path: Path) -> None:
    env.update(
        COOP_DB=str(tmp_path / "other.db"),
        COOP_DOOR_SOCKET=str(tmp_path / "elsewhere" / "door.sock"),
        COOP_CLIENT_TIMEOUT_S="2.5",
        COOP_BACKOFF_BASE_S="0.5",
        COOP_BACKOFF_MAX_S="60",
        COOP_BACKSTOP_S="120",
        COOP_BATCH_MAX="1",
        COOP_UNREACHABLE_RETRY_S="0.25",
    )
    config = NotifierConfig.from_env(env)
    assert config.batch_max == 1
    assert config.unreachable_retry_s == 0.25
    assert config.db_path == tmp_path / "other.db"
    assert config.door_socket == tmp_path / "elsewhere" / "door.sock"
    assert (config.client_timeout_s, config.backoff_base_s) == (2.5, 0.5)
    assert (config.backoff_max_s, config.backstop_s) == (60.0, 120.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COOP_CLIENT_TIMEOUT_S", "soon"),
        ("COOP_CLIENT_TIMEOUT_S", "0"),
        ("COOP_BACKOFF_BASE_S", "-1"),
        ("COOP_BACKOFF_MAX_S", "nan"),
        ("COOP_BACKSTOP_S", "1e9"),
        # The settings that named a TCP door: refused, whatever they say.
        ("COOP_DOOR_URL", "http://127.0.0.1:8765/api/coop/engine/notify"),
        ("CHIEF_PORT", "8765"),
        ("CHIEF_HOST", "127.0.0.1"),
        ("COOP_BATCH_MAX", "0"),
        ("COOP_BATCH_MAX", "65"),
        ("COOP_BATCH_MAX", "8.5"),
        ("COOP_BATCH_MAX", "many"),
        ("COOP_UNREACHABLE_RETRY_S", "0"),
        ("COOP_UNREACHABLE_RETRY_S", "inf"),
    ],
)
def test_a_wrong_value_stops_start_naming_the_setting(
    env: dict[str, str], name: str, value: str
) -> None:
    env[name] = value
    with pytest.raises(ConfigError, match=name):
        NotifierConfig.from_env(env)


def test_a_backoff_cap_below_its_base_is_refused(env: dict[str, str]) -> None:
    env.update(COOP_BACKOFF_BASE_S="10", COOP_BACKOFF_MAX_S="5")
    with pytest.raises(ConfigError, match="COOP_BACKOFF_MAX_S"):
        NotifierConfig.from_env(env)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_file_others_can_read_is_refused(
    env: dict[str, str], tmp_path: Path, mode: int
) -> None:
    (tmp_path / "service.key").chmod(mode)
    with pytest.raises(ServiceKeyError, match=r"must be private \(0600\).*chmod 600"):
        NotifierConfig.from_env(env)


def test_a_missing_or_empty_key_file_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    env["COOP_SERVICE_KEY_FILE"] = str(tmp_path / "nope.key")
    with pytest.raises(ServiceKeyError, match="does not exist"):
        NotifierConfig.from_env(env)
    empty = tmp_path / "empty.key"
    empty.write_text("\n")
    empty.chmod(0o600)
    env["COOP_SERVICE_KEY_FILE"] = str(empty)
    with pytest.raises(ServiceKeyError, match="is empty"):
        NotifierConfig.from_env(env)


def test_every_notifier_error_shares_one_root_and_has_a_default_message() -> None:
    for cls in (ConfigError, ServiceKeyError):
        assert issubclass(cls, NotifierError)
        assert str(cls()) == (cls.__doc__ or "").strip()
