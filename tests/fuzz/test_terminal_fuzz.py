"""Nothing raw reaches a terminal, for any text (issue 26, close the class): every text field of
a ledger (a todo's and a request's title, body, reason, summary, commit and actors, an event's
actor and payload, a notification's text, kind and errors) and of a Chief's conversation (a
message's text) holds drawn text, control characters of every kind included; every human
command that prints one (`coop list`, `todo show`, `request show`, `request wait`, `history`,
`outbox list`, `status`, and `chief log`) prints no character a terminal acts on (C0 but the
newline that ends a line, DEL, C1, the bidi controls, the line separators), and `--json` gives
back each stored text exactly.

The texts are written straight into the files (the CLI refuses a NUL in argv; the phone, an
older release or another tool might not have). The entry points run in-process
(`main(argv)`, the console scripts' own code) with stdout strict UTF-8, as a process has it;
tests/e2e/cli/test_terminal_output.py runs the real processes.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.cli
from chief import cli as chief_cli
from tests.fuzz.argv import run_in_process
from tests.support.door import OWNER

pytestmark = pytest.mark.timeout(240)

EXAMPLES = 25
#: A terminal acts on these (plumbing.terminal); a newline is the printer's own line end.
ACTING = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
#: Any text SQLite can hold (every code point but the lone surrogates), controls favoured.
CONTROLS = st.sampled_from(
    ["\x00", "\x07", "\x1b", "\x1b[2J", "\x1b]0;t\x07", "\x9b", "\r", "\n", "\t", "\x7f",
     "\u202e", "\u2066", "\u2028", "\x85"]
)  # fmt: skip
ANY_TEXT = st.lists(
    st.text(st.characters(codec="utf-8", categories=None), max_size=8) | CONTROLS, max_size=6
).map("".join)
NONEMPTY = ANY_TEXT.filter(bool)

#: The text columns a person reads, by table (the rows seeded below have each).
ITEM_FIELDS = (
    "title", "body", "reason", "result_summary", "commit_sha", "addressed_to", "taken_by",
    "closed_by", "created_by",
)  # fmt: skip
OUTBOX_FIELDS = ("text", "kind", "last_error", "door_answer", "cancel_reason")

#: Every human command that prints a stored text.
COOP_HUMAN = [
    ["list", "--all"],
    ["todo", "show", "1"],
    ["todo", "show", "2"],
    ["request", "show", "1"],
    ["request", "wait", "1", "--timeout", "0"],
    ["history", "todo", "1"],
    ["history", "request", "1"],
    ["outbox", "list"],
    ["status"],
]


@contextlib.contextmanager
def restored_logging() -> Iterator[None]:
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A ledger with todo #1 done, todo #2 taken, request #1 closed, a notification tried once
    (failing), and a Chief's conversation with one line."""
    found = tmp_path_factory.mktemp("terminal-fuzz")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COOP_HOME", str(found))
        mp.setenv("COOP_KICK", "off")
        mp.setenv("COOP_ACTOR", "builder")
        mp.setenv("CHIEF_OWNER", OWNER)
        for name in ("COOP_DB", "COOP_OWNER_FILE", "CHIEF_DB", "COOP_DOOR_URL"):
            mp.delenv(name, raising=False)
        # The door is not running: `coop status` says so in its own words.
        mp.setenv("COOP_DOOR_SOCKET", str(found / "door.sock"))
        for argv in (
            ["todo", "add", "a"],
            ["todo", "take", "1"],
            ["todo", "done", "1", "--summary", "s"],
            ["todo", "add", "b"],
            ["todo", "take", "2"],
            ["request", "add", "r", "--to", "reviewer"],
            ["request", "close", "1", "--summary", "s"],
            ["notify", "n"],
        ):
            assert run_in_process(engine.cli.main, argv).code == 0, argv
        with restored_logging():
            landed = run_in_process(
                chief_cli.main, ["report", "--source", "cron:fuzz", "--fire", "1", "x"]
            )
        assert landed.code == 0, landed.err
        yield found


def store(folder: Path, texts: dict[str, str]) -> None:
    """Every text field of every row set to its drawn text (the take made stale, the
    notification failing, so `coop status` shows both)."""
    box = ", ".join(f"{field} = :{field}" for field in OUTBOX_FIELDS)
    with contextlib.closing(sqlite3.connect(folder / "coop.db")) as conn, conn:
        for table in ("todos", "requests"):
            fields = [f for f in ITEM_FIELDS if table == "requests" or f != "addressed_to"]
            items = ", ".join(f"{field} = :{field}" for field in fields)
            conn.execute(f"UPDATE {table} SET {items}", texts)
        conn.execute("UPDATE todos SET taken_at = '2020-01-01T00:00:00.000000Z' WHERE id = 2")
        conn.execute(f"UPDATE coop_outbox SET {box}, attempts = 3", texts)
        for kind in ("todo", "request"):
            conn.execute(
                "INSERT INTO coop_events (item_kind, item_id, event, actor, at, payload)"
                " VALUES (?, 1, 'note', ?, '2026-01-01T00:00:00.000000Z', ?)",
                (kind, texts["created_by"], texts["body"]),
            )
    with contextlib.closing(sqlite3.connect(folder / "chief.db")) as conn, conn:
        conn.execute("UPDATE messages SET content = ?", (texts["text"],))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.fixed_dictionaries({f: NONEMPTY for f in {*ITEM_FIELDS, *OUTBOX_FIELDS}}))
def test_no_human_command_prints_a_character_a_terminal_acts_on(
    folder: Path, monkeypatch: pytest.MonkeyPatch, texts: dict[str, str]
) -> None:
    monkeypatch.setenv("COOP_HOME", str(folder))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_DOOR_SOCKET", str(folder / "door.sock"))  # no door there
    monkeypatch.setenv("CHIEF_OWNER", OWNER)
    store(folder, texts)
    for argv in COOP_HUMAN:
        printed = run_in_process(engine.cli.main, argv)
        assert not ACTING.findall(printed.out), (argv, printed.out)
        assert not ACTING.findall(printed.err), (argv, printed.err)
    with restored_logging():
        printed = run_in_process(chief_cli.main, ["log"])
    assert printed.code == 0, printed.err
    assert not ACTING.findall(printed.out), printed.out


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=st.fixed_dictionaries({f: NONEMPTY for f in {*ITEM_FIELDS, *OUTBOX_FIELDS}}))
def test_json_gives_back_every_stored_text_exactly(
    folder: Path, monkeypatch: pytest.MonkeyPatch, texts: dict[str, str]
) -> None:
    monkeypatch.setenv("COOP_HOME", str(folder))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("CHIEF_OWNER", OWNER)
    store(folder, texts)
    shown = run_in_process(engine.cli.main, ["request", "show", "1", "--json"])
    assert not ACTING.findall(shown.out.replace("\n", "")), shown.out
    request = json.loads(shown.out)["request"]
    assert {field: request[field] for field in ITEM_FIELDS} == {f: texts[f] for f in ITEM_FIELDS}
    listed = run_in_process(engine.cli.main, ["outbox", "list", "--json"])
    row = json.loads(listed.out)[0]
    assert {field: row[field] for field in ("text", "kind", "last_error")} == {
        field: texts[field] for field in ("text", "kind", "last_error")
    }
    with restored_logging():
        logged = run_in_process(chief_cli.main, ["log", "--json"])
    assert not ACTING.findall(logged.out.replace("\n", "")), logged.out
    assert json.loads(logged.out.splitlines()[0])["content"] == texts["text"]
