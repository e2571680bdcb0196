"""What people read of `coop` and `chief` (issue 27, "Output for people"): every human command,
run as a real process on one fixed ledger built through the real verbs, prints plain words
(golden lines below), aligned columns where it lists, `—` for nothing, `£` as `£`, and none of
Python's insides (`None`, `True`, `False`, a repr's quotes, `\\uXXXX`, `[Errno N]`, an internal
field); `--json` stays the data, exactly as coop.db and chief.db hold it.

The project has no clock to fix, so the times are normalised: a stored time shown as
`2026-12-03 10:28 UTC (3 min ago)` reads `<when>`, an age `<ago>`, and a run of spaces that
aligns a column reads as two spaces (the alignment is checked on the raw lines instead).
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.support.procs import clean_env, coop, run_module, write_key

pytestmark = pytest.mark.timeout(120)

WHEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC \(\d+ (s|min) ago\)")
AGO = re.compile(r"\d+ (s|min) ago")
#: What a person must never read: Python's values and reprs, JSON escapes, errno numbers.
INSIDES = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\\u[0-9a-f]{4}|\\n|'|\[Errno|fast_path|ask_key")


class Ledger(NamedTuple):
    folder: Path
    env: dict[str, str]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Ledger:
    """todo 1 done (a body and a summary of two lines each), todo 2 taken, request 1 to the
    owner with choices, request 2 closed on the fast path by its addressee, one note."""
    folder = tmp_path_factory.mktemp("people")
    env = clean_env(folder, COOP_ACTOR="builder", COOP_KICK="off", CHIEF_OWNER="owner")
    write_key(folder / "service.key", "people-test-key-0123456789")
    for args in (
        ["todo", "add", "Water the plants £5", "--body", "the basil\nthe fern"],
        ["todo", "take", "1"],
        ["todo", "done", "1", "--summary", "watered\nall three"],
        ["todo", "add", "Fix the gate"],
        ["todo", "take", "2"],
        ["request", "add", "Buy milk £2", "--to", "owner", "--choices", "yes,no"],
        ["request", "add", "Review", "--to", "reviewer"],
        ["--as", "reviewer", "request", "close", "2", "--summary", "looks good"],
        ["notify", "hello £"],
    ):
        done = coop(*args, env=env, inherit=False)
        assert done.returncode == 0, done.stderr
    for args in (
        ["--source", "cron:backup", "backup done £3\nsecond line"],
        ["--source", "cron:x", "ok"],
    ):
        done = run_module("chief", ["report", *args], env=env, inherit=False)
        assert done.returncode == 0, done.stderr
    return Ledger(folder, env)


def human(ledger: Ledger, *args: str, module: str = "engine") -> list[str]:
    done = run_module(module, list(args), env=ledger.env, inherit=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    lines = done.stdout.splitlines()
    for line in lines:
        assert not INSIDES.search(line), line
    return lines


def normal(lines: list[str]) -> list[str]:
    return [re.sub(" {2,}", "  ", AGO.sub("<ago>", WHEN.sub("<when>", x))).rstrip() for x in lines]


def machine(ledger: Ledger, *args: str) -> Any:
    done = coop(*args, "--json", env=ledger.env, inherit=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def table(ledger: Ledger, sql: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(ledger.folder / "coop.db")) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(row) for row in conn.execute(sql)]


def aligned(lines: list[str], *words: str) -> None:
    """Each line's cell starting with the n-th of `words` starts at the same column."""
    starts = {line.index(word) for line, word in zip(lines, words, strict=True)}
    assert len(starts) == 1, "\n".join(lines)


def test_list_is_aligned_columns_of_plain_words(ledger: Ledger) -> None:
    lines = human(ledger, "list", "--all")
    assert normal(lines) == [
        "todo #1  [done]  Water the plants £5",
        "todo #2  [taken by builder, <ago>]  Fix the gate",
        "request #1  [open]  Buy milk £2  (for owner)",
        "request #2  [closed]  Review  (for reviewer)",
    ]
    aligned(lines, "[", "[", "[", "[")
    aligned(lines, "Water", "Fix", "Buy", "Review")
    aligned(lines[2:], "(for", "(for")


def test_history_says_each_event_in_words(ledger: Ledger) -> None:
    lines = human(ledger, "history", "request", "2")
    # The close on the fast path (never taken) records `fast_path`: the machine's, not shown.
    assert normal(lines) == [
        "<when>  add  builder  addressed to: reviewer; title: Review",
        "<when>  close  reviewer",
    ]
    aligned(lines, "builder", "reviewer")


def test_todo_show_labels_each_field_and_keeps_lines(ledger: Ledger) -> None:
    assert normal(human(ledger, "todo", "show", "1")) == [
        "todo #1  [done]  Water the plants £5",
        "  body:  the basil",
        "  the fern",
        "  created:  <when> by builder",
        "  taken:  <when> by builder",
        "  closed:  <when> by builder",
        "  summary:  watered",
        "  all three",
        "  updated:  <when>",
        "events:",
        "  <when>  add  builder  title: Water the plants £5",
        "  <when>  take  builder",
        "  <when>  done  builder",
    ]


def test_request_show_prints_the_pound_sign_and_no_internal_field(ledger: Ledger) -> None:
    assert normal(human(ledger, "request", "show", "1")) == [
        "request #1  [open]  Buy milk £2  (for owner)",
        "  body:  —",
        "  choices:  yes / no",
        "  created:  <when> by builder",
        "  updated:  <when>",
        "events:",
        "  <when>  add  builder  addressed to: owner; choices: yes / no; title: Buy milk £2",
    ]


def test_outbox_list_is_a_table_with_the_first_line_of_each_text(ledger: Ledger) -> None:
    lines = human(ledger, "outbox", "list")
    assert normal(lines) == [
        "ID  STATE  TRIES  KIND  QUEUED  TEXT  LAST ERROR",
        "#4  pending  0  note  <ago>  hello £  —",
        "#3  pending  0  request_closed  <ago>  request #2 closed by reviewer: Review …  —",
        "#2  pending  0  request_added  <ago>  request #1 from builder: Buy milk £2 (yes / no)  —",
        "#1  pending  0  todo_done  <ago>  todo #1 done by builder: Water the plants £5 …  —",
    ]
    aligned(lines, "TEXT", "hello", "request #2", "request #1", "todo #1")


def test_chief_log_marks_each_line_and_keeps_the_pound_sign(ledger: Ledger) -> None:
    lines = human(ledger, "log", module="chief")
    stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
    assert [stamp.sub("<at>", line) for line in lines] == [
        "#1     <at>  [cron]    backup done £3",
        "                                      second line",
        "#2     <at>  [cron]    ok",
    ]


def test_json_is_the_data_as_stored(ledger: Ledger) -> None:
    todos = table(ledger, "SELECT * FROM todos ORDER BY id")
    # The one column stored as JSON text: every answer gives its list.
    requests = [
        row | {"choices": json.loads(row["choices"]) if row["choices"] else None}
        for row in table(ledger, "SELECT * FROM requests ORDER BY id")
    ]
    listed = machine(ledger, "list", "--all")
    assert [{k: v for k, v in row.items() if k not in ("kind", "stale")} for row in listed] == [
        *todos,
        *requests,
    ]
    assert machine(ledger, "outbox", "list") == table(
        ledger, "SELECT * FROM coop_outbox ORDER BY id DESC"
    )
    assert machine(ledger, "history", "request", "2") == table(
        ledger, "SELECT * FROM coop_events WHERE item_kind = 'request' AND item_id = 2 ORDER BY id"
    )
    shown = machine(ledger, "request", "show", "1")
    assert shown["request"] == requests[0]
    assert "fast_path" in machine(ledger, "history", "request", "2")[1]["payload"]


def test_status_ends_with_its_verdict(ledger: Ledger) -> None:
    door = str(ledger.folder / "door.sock")  # the door's socket: nothing listens there
    done = coop("status", "--check", env=ledger.env | {"COOP_DOOR_SOCKET": door}, inherit=False)
    assert done.returncode == 1
    lines = [line.replace(door, "<socket>") for line in done.stdout.splitlines()]
    for line in lines:
        assert not INSIDES.search(line), line
    waits = [re.sub(r"waiting \d+ (s|min)", "waiting <s>", line) for line in lines[1:]]
    assert normal(waits) == [
        "todos: 1 done, 1 taken",
        "requests: 1 closed, 1 open",
        "outbox: 4 pending, 0 delivered, 0 cancelled; the oldest pending is #1, waiting <s>",
        "worker lock: free",
        "uncertain receipts: none",
        "door: did not answer at <socket> (the door is not running)",
        "telegram queue: unknown (the door did not answer)",
        "needs a person: the door did not answer at <socket>: the door is not running",
        "verdict: not healthy (1 problem above)",
    ]
