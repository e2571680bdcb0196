"""`coop todo show N` and `coop request show N`: the item's fields and its last events, as lines
or `--json`, on a real ledger file; an unknown id is one line and exit 2 (docs/cli.md's exit
table: a usage refusal, as every unknown id is)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from engine.cli import main

Coop = Callable[..., tuple[int, str, str]]


@pytest.fixture
def coop(db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Coop:
    """Run `coop ARGS` in this process on `db`; answer (status, stdout, stderr)."""
    monkeypatch.setenv("COOP_DB", db)
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "agent")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        status = main(list(args))
        printed = capsys.readouterr()
        return status, printed.out, printed.err

    return run


def test_todo_show_prints_the_fields_and_the_last_events(coop: Coop) -> None:
    coop("todo", "add", "Water the plants", "--body", "the basil too")
    coop("todo", "take", "1")
    coop("todo", "done", "1", "--summary", "watered")

    status, out, err = coop("todo", "show", "1")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "todo #1  [done]  Water the plants"
    assert "  body:     the basil too" in lines
    assert "  summary:  watered" in lines
    assert any(re.fullmatch(r"  taken:    \S+ \S+ UTC \(\d+ s ago\) by agent", x) for x in lines)
    assert lines[-4] == "events:"
    assert [line.split("ago)")[1].split()[0] for line in lines[-3:]] == ["add", "take", "done"]

    status, out, _ = coop("todo", "show", "1", "--last", "1")
    assert status == 0
    assert out.splitlines()[-1].split("ago)")[1].split()[:2] == ["done", "agent"]
    assert " add " not in out


def test_show_json_is_the_item_and_its_last_events(coop: Coop) -> None:
    coop("request", "add", "Review the ledger", "--to", "reviewer")
    coop("--as", "reviewer", "request", "take", "1")

    status, out, _ = coop("request", "show", "1", "--json")
    answer = json.loads(out)
    assert status == 0
    assert answer["request"]["id"] == 1
    assert answer["request"]["addressed_to"] == "reviewer"
    assert answer["request"]["taken_by"] == "reviewer"
    assert [event["event"] for event in answer["events"]] == ["add", "take"]

    _, out, _ = coop("request", "show", "1", "--json", "--last", "0")
    assert json.loads(out)["events"] == []


@pytest.mark.parametrize("kind", ["todo", "request"])
def test_an_unknown_id_is_one_line_and_exit_2(coop: Coop, kind: str) -> None:
    # docs/cli.md, exit statuses: an unknown id is a usage refusal, 2 (in a ledger a write
    # made: a read finds none otherwise, and says that instead).
    assert coop("todo", "add", "x")[0] == 0
    assert coop(kind, "show", "7") == (
        2,
        "",
        f"coop: {kind} #7 does not exist — `coop list --all` shows the ids\n",
    )
