"""Nothing raw reaches a terminal (issue 26, "Terminal escapes reach the terminal"): a title, a
body, a summary, an owner's reply, a notification and a Chief report holding ESC, BEL, CSI, OSC,
C1, CR, DEL, NUL or a bidi override are printed escaped by every human command of `coop` and
`chief`, run as real processes on a real coop.db and chief.db; `--json` gives back the stored
text exactly.

The texts go in through the commands themselves where the CLI takes them (argv refuses a NUL),
and straight into the files where only the phone or an older release could have written them
(a NUL, a reply spanning lines).
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from typing import Any, NamedTuple

import pytest

from tests.support.door import OWNER
from tests.support.procs import PROCESS_TIMEOUT_S, clean_env

pytestmark = pytest.mark.timeout(120)

#: OSC (set the window title), CSI (clear the screen), CSI as the one C1 byte, CR (rewrite the
#: line), a right-to-left override, DEL; what argv can carry.
HOSTILE = "title\x1b]0;pwned\x07 clear\x1b[2J c1\x9b31m cr\roverwritten bidi\u202eevil del\x7f"
#: What only the phone or an older release could have stored: a NUL, and a second line.
STORED = HOSTILE + " nul\x00end\nsecond line\x1b[1m"
#: Shown of HOSTILE, escaped: what the person reads instead of what the terminal would do.
SHOWN = "title\\x1b]0;pwned\\x07 clear\\x1b[2J c1\\x9b31m cr\\roverwritten bidi\\u202eevil"
#: A character a terminal acts on (plumbing.terminal), newline aside: the printer's own layout.
ACTING = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def acting(output: str) -> list[str]:
    return sorted({repr(char) for char in ACTING.findall(output)})


class Printed(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def run_module(module: str, args: list[str], env: dict[str, str]) -> Printed:
    """`python -m module args...` with exactly `env`; its output as it reached the terminal
    (decoded, never newline-translated: a text-mode pipe turns a CR into a newline)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    return Printed(done.returncode, done.stdout.decode(), done.stderr.decode())


def coop(*args: str, env: dict[str, str]) -> Printed:
    return run_module("engine", list(args), env)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A coop.db whose every text field holds HOSTILE (STORED where argv cannot carry it):
    todo 1 done, todo 2 taken long ago (a stale take, which `coop status` shows), request 1
    closed, one notification pending."""
    folder = tmp_path_factory.mktemp("terminal")
    env = clean_env(folder, COOP_ACTOR="builder", COOP_KICK="off")
    for args in (
        ["todo", "add", HOSTILE, "--body", HOSTILE],
        ["todo", "take", "1"],
        ["todo", "done", "1", "--summary", HOSTILE],
        ["todo", "add", HOSTILE],
        ["todo", "take", "2"],
        ["request", "add", HOSTILE, "--to", "reviewer", "--body", HOSTILE],
        ["request", "close", "1", "--summary", HOSTILE],
        ["notify", HOSTILE],
    ):
        done = coop(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
    with contextlib.closing(sqlite3.connect(folder / "coop.db")) as conn, conn:
        conn.execute(
            "UPDATE todos SET title = ?, taken_at = '2020-01-01T00:00:00.000000Z' WHERE id = 2",
            (STORED,),
        )
        conn.execute("UPDATE requests SET result_summary = ? WHERE id = 1", (STORED,))
        conn.execute("UPDATE coop_outbox SET text = ?", (STORED,))
    return env


#: Every `coop` command that prints a person's text, with the line it must show escaped.
HUMAN = {
    "list": ["list", "--all"],
    "todo show (done)": ["todo", "show", "1"],
    "todo show (taken)": ["todo", "show", "2"],
    "request show": ["request", "show", "1"],
    "request wait": ["request", "wait", "1", "--timeout", "0"],
    "history todo": ["history", "todo", "1"],
    "history request": ["history", "request", "1"],
    "outbox list": ["outbox", "list"],
    "status": ["status"],
    "a refusal naming the row": ["todo", "take", "1"],
}


@pytest.mark.parametrize("name", HUMAN)
def test_coop_prints_every_stored_text_escaped(ledger: dict[str, str], name: str) -> None:
    done = coop(*HUMAN[name], env=ledger)
    assert "Traceback" not in done.stderr, done.stderr
    assert acting(done.stdout) == [], done.stdout
    assert acting(done.stderr) == [], done.stderr


@pytest.mark.parametrize(
    "args", [["list", "--all"], ["todo", "show", "1"], ["request", "show", "1"]]
)
def test_coop_shows_the_escape_where_the_control_was(
    ledger: dict[str, str], args: list[str]
) -> None:
    """Escaped, not dropped: the person sees that the text holds a control, and which."""
    assert SHOWN in coop(*args, env=ledger).stdout


def _field(answer: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        answer = answer[step]
    return answer


#: `--json` answers and where each keeps a stored text.
EXACT: dict[str, tuple[list[str], tuple[Any, ...], str]] = {
    "list": (["list", "--all", "--json"], (1, "title"), STORED),
    "todo show": (["todo", "show", "1", "--json"], ("todo", "body"), HOSTILE),
    "request show": (["request", "show", "1", "--json"], ("request", "result_summary"), STORED),
    "request wait": (
        ["request", "wait", "1", "--timeout", "0", "--json"],
        ("request", "result_summary"),
        STORED,
    ),
    "outbox list": (["outbox", "list", "--json"], (0, "text"), STORED),
}


@pytest.mark.parametrize("name", EXACT)
def test_coop_json_gives_back_the_stored_text_exactly(ledger: dict[str, str], name: str) -> None:
    args, path, stored = EXACT[name]
    done = coop(*args, env=ledger)
    assert done.returncode == 0, done.stderr
    assert acting(done.stdout) == [], done.stdout
    assert _field(json.loads(done.stdout), path) == stored


@pytest.fixture(scope="module")
def chief_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A chief.db with a report landed by `chief report` (no door: it lands the line itself),
    then its text as only the door could have stored it (a NUL, a second line)."""
    folder = tmp_path_factory.mktemp("chief-terminal")
    env = clean_env(folder, CHIEF_OWNER=OWNER)
    done = run_module(
        "chief",
        ["report", "--source", "cron:hostile", "--fire", "1", "--wait", "5", HOSTILE],
        env,
    )
    assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(folder / "chief.db")) as conn, conn:
        conn.execute(
            "INSERT INTO messages (chief_id, role, content, turn_kind, origin, created_at)"
            " SELECT chief_id, role, ?, turn_kind, origin, created_at FROM messages",
            (STORED,),
        )
    return env


def test_chief_log_prints_every_message_escaped(chief_env: dict[str, str]) -> None:
    done = run_module("chief", ["log"], chief_env)
    assert done.returncode == 0, done.stderr
    assert acting(done.stdout) == [], done.stdout
    assert SHOWN in done.stdout
    # A message spanning lines keeps its lines: the newline is the log's layout.
    assert "second line\\x1b[1m" in done.stdout


def test_chief_log_json_gives_back_the_stored_text_exactly(chief_env: dict[str, str]) -> None:
    done = run_module("chief", ["log", "--json"], chief_env)
    assert done.returncode == 0, done.stderr
    assert acting(done.stdout) == [], done.stdout
    contents = [json.loads(line)["content"] for line in done.stdout.splitlines()]
    assert contents == [HOSTILE, STORED]


def test_chief_report_refusal_prints_the_text_escaped(chief_env: dict[str, str]) -> None:
    """A refusal that quotes what it was given quotes it escaped."""
    done = run_module("chief", ["report", "--source", "cron:x", "--wait", HOSTILE, "x"], chief_env)
    assert done.returncode == 2, done.stderr
    assert acting(done.stderr) == [], done.stderr
