"""A setting given an undocumented form stops the process at start with one line naming it and
a non-zero exit, never a traceback, never a guess: real processes (`chief serve`, `coop serve`,
`coop status`). Before, `CHIEF_URGENT_RERING_S=٣٠` rang every 30 s and
`COOP_LOG_TIMESTAMP=yes` was silently taken as `on`. The whole family is the property in
tests/contract/test_settings_parse.py, at the loaders these processes call."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.procs import clean_env, run_module, write_key

TIMEOUT_S = 30.0


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    write_key(tmp_path / "service.key", "k" * 32)
    return clean_env(
        tmp_path,
        COOP_SERVICE_KEY_FILE=str(tmp_path / "service.key"),
        COOP_DB=str(tmp_path / "coop.db"),
        CHIEF_METRICS_PORT="off",
        COOP_METRICS_PORT="off",
    )


@pytest.mark.parametrize(
    ("module", "args", "setting", "value"),
    [
        ("chief", ["serve"], "CHIEF_URGENT_RERING_S", "٣٠"),
        ("chief", ["serve"], "CHIEF_METRICS_PORT", "８７６５"),
        ("chief", ["serve"], "CHIEF_NOTIFY_BATCH_MAX", "6_4"),
        ("chief", ["serve"], "CHIEF_TEST_URGENT_SHORT", "yes"),
        ("chief", ["serve"], "CHIEF_ESCALATE_AFTER_S", "59"),
        ("chief", ["serve"], "CHIEF_ESCALATE_AFTER_S", "10 min"),
        ("chief", ["serve"], "COOP_LOG_TIMESTAMP", "yes"),
        ("engine", ["serve"], "COOP_LOG_TIMESTAMP", "yes"),
        ("engine", ["serve"], "COOP_METRICS_PORT", "٨٧٦٤"),
        ("engine", ["serve"], "COOP_BACKOFF_BASE_S", "inf"),
        ("engine", ["status"], "COOP_STALE_AFTER_S", "３６００"),
    ],
    ids=lambda value: str(value),
)
def test_an_undocumented_value_stops_the_process_in_one_line(
    env: dict[str, str], module: str, args: list[str], setting: str, value: str
) -> None:
    if args == ["status"]:  # a read: on a ledger a write made (it refuses a folder without one)
        made = run_module(
            "engine", ["todo", "add", "x", "--as", "me"], env, TIMEOUT_S, inherit=False
        )
        assert made.returncode == 0, made.stderr
    result = run_module(module, args, env | {setting: value}, TIMEOUT_S, inherit=False)
    # `coop serve` also logs the refusal as its JSON event; the line a person reads is one.
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("{")]
    assert result.returncode != 0, result.stderr
    assert len(lines) == 1, result.stderr
    assert setting in lines[0], lines
    assert "Traceback" not in result.stderr


def test_a_second_pairing_naming_the_owner_stops_the_door_in_one_line(
    env: dict[str, str], tmp_path: Path
) -> None:
    from chief.telegram.pairing import Pairing, write_pairing

    owner = Pairing(4242, 4242, None, "Owner", "@coop_bot", "2026-12-06T03:00:00+00:00")
    write_pairing(tmp_path / "telegram-pairing.json", owner)
    write_pairing(tmp_path / "telegram-pairing-second.json", owner)
    telegram = {"TELEGRAM_BOT_TOKEN": "123456:token", "TELEGRAM_API_BASE": "http://127.0.0.1:9/bot"}
    result = run_module("chief", ["serve"], env | telegram, TIMEOUT_S, inherit=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "telegram-pairing-second.json names the owner's chat or user" in lines[0]
