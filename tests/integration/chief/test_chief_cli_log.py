"""`chief log`: the conversation as a person reads it, coop and cron lines badged."""

from __future__ import annotations

import json

import anyio
import pytest

from chief.cli import main
from chief.config import ChiefConfig
from chief.conversation import Chief


def _write_conversation(config: ChiefConfig) -> None:
    async def write() -> None:
        async with Chief.open(config) as chief, chief.turn():
            await chief.append_message("user", "is the backup done?")
            await chief.append_message("assistant", "checking\nsecond line")
        async with Chief.open(config) as chief:
            await chief.report("todo #41 done: fix the gate", "coop-notify:41", wait=None)
            await chief.report("backup finished", "cron:backup", wait=None)

    anyio.run(write)


@pytest.fixture
def conversation(chief_config: ChiefConfig, monkeypatch: pytest.MonkeyPatch) -> ChiefConfig:
    _write_conversation(chief_config)
    monkeypatch.setenv("CHIEF_DB", str(chief_config.db_path))
    monkeypatch.delenv("CHIEF_OWNER", raising=False)  # the only owner in the file is picked
    return chief_config


def test_log_marks_coop_and_cron_lines_apart_from_chat(
    conversation: ChiefConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5  # four messages, one of them two lines long
    assert "user" in lines[0]
    assert "is the backup done?" in lines[0]
    assert "assistant" in lines[1]
    assert lines[2].strip() == "second line"
    assert "[coop]" in lines[3]
    assert "todo #41 done" in lines[3]
    assert "assistant" not in lines[3]
    assert "[cron]" in lines[4]
    assert "backup finished" in lines[4]


def test_log_json_and_limit(conversation: ChiefConfig, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "--json", "--limit", "2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["turn_kind"], r["badge"], r["content"]) for r in rows] == [
        ("coop", "[coop]", "todo #41 done: fix the gate"),
        ("cron", "[cron]", "backup finished"),
    ]
    assert rows[0]["external_request_id"] == "chief-report:coop-notify:41"


def test_log_of_an_unknown_owner_is_one_line_and_exit_1(
    conversation: ChiefConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["log", "--owner", "mum"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "mum" in err


def test_an_empty_log_says_so(
    chief_config: ChiefConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def open_once() -> None:
        async with Chief.open(chief_config):
            pass

    anyio.run(open_once)
    capsys.readouterr()  # the open's own log line
    monkeypatch.setenv("CHIEF_DB", str(chief_config.db_path))
    monkeypatch.setenv("CHIEF_OWNER", chief_config.owner)
    assert main(["log"]) == 0
    assert capsys.readouterr().out == "no messages yet\n"
    assert main(["log", "--json"]) == 0
    assert capsys.readouterr().out == ""  # no line for a script to read as a message
