"""`coop serve`'s address settings, read once at start
(`notifier.engine_service.ServiceConfig`): the socket (`COOP_SERVICE_SOCKET`, else
`<COOP_HOME>/service.sock`), the metrics port
(`COOP_METRICS_PORT`: ASCII digits 0..65535 or `off`), and the TCP era's three settings refused
whatever their value, each naming what to set instead. Every value is either taken or one
`UsageError` naming its setting: never another exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import UsageError
from engine.service_socket import TCP_SETTINGS
from notifier.engine_service import DEFAULT_METRICS_PORT, ServiceConfig

ANY_TEXT = st.text(max_size=12)
FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.delenv("COOP_DB", raising=False)
    return tmp_path


def test_the_defaults_are_the_socket_in_the_data_folder_and_metrics_on_8764(home: Path) -> None:
    config = ServiceConfig.from_env({"COOP_HOME": str(home)})
    assert config.socket_path == str(home / "service.sock")
    assert config.metrics_port == DEFAULT_METRICS_PORT == 8764


def test_metrics_off_and_zero(home: Path) -> None:
    assert ServiceConfig.from_env({"COOP_METRICS_PORT": "off"}).metrics_port is None
    assert ServiceConfig.from_env({"COOP_METRICS_PORT": "0"}).metrics_port == 0


@FIXTURE_OK
@given(name=st.sampled_from(sorted(TCP_SETTINGS)), value=ANY_TEXT)
def test_a_tcp_era_setting_is_refused_in_one_line_naming_what_to_set(name: str, value: str) -> None:
    env = {name: value}
    if not value.strip():
        ServiceConfig.from_env(env)  # blank counts as unset
        return
    with pytest.raises(UsageError) as refused:
        ServiceConfig.from_env(env)
    message = str(refused.value)
    assert message.startswith(f"{name} is no longer read")
    assert "COOP_SERVICE_SOCKET" in message or "COOP_METRICS_PORT" in message
    assert "\n" not in message


@FIXTURE_OK
@given(raw=ANY_TEXT | st.integers(-10, 70000).map(str))
def test_any_metrics_port_is_a_port_off_or_one_line_naming_the_setting(raw: str) -> None:
    try:
        config = ServiceConfig.from_env({"COOP_METRICS_PORT": raw})
    except UsageError as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        assert refused.startswith("COOP_METRICS_PORT must be a port number or 'off'")
        return
    text = raw.strip()
    if text in ("", "off"):
        assert config.metrics_port == (None if text == "off" else DEFAULT_METRICS_PORT)
    else:
        assert text.isascii(), raw  # never another script's digits
        assert text.isdigit(), raw
        assert config.metrics_port == int(text)
        assert 0 <= config.metrics_port <= 65535


@pytest.mark.parametrize("raw", ["٨٧٦٤", "8_764", "+8764", "８７６４", "65536", "-1"])
def test_digits_that_int_reads_but_a_port_is_not_are_refused(raw: str) -> None:
    with pytest.raises(UsageError, match="COOP_METRICS_PORT"):
        ServiceConfig.from_env({"COOP_METRICS_PORT": raw})


@FIXTURE_OK
@given(raw=ANY_TEXT)
def test_any_socket_setting_is_an_absolute_path_or_one_line_naming_it(raw: str) -> None:
    try:
        path = ServiceConfig.from_env({"COOP_SERVICE_SOCKET": raw}).socket_path
    except UsageError as exc:
        path = str(exc)
        assert path.startswith("COOP_SERVICE_SOCKET="), path
        assert path.endswith("must be an absolute path"), path
    else:
        assert path.startswith("/"), path
