"""A reader that goes away ends every command quietly (issue 34, "Pipes"): each command of
`coop`, `chief` and `coop-notifier` that prints more than one line, run as a real process into
a real `head`, ends with no traceback and no message, with the status a shell gives a command
SIGPIPE ended (141), or 0 when its whole output fit in the pipe before the reader left.

`head -n 0` reads nothing and exits at once: the command's first write meets a pipe with no
reader, every time (with `head -n 1` it only sometimes does, as the issue saw: 2 runs of 3).
`head -n 1` over outputs far larger than a pipe holds is the person's own case, and as sure.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine import direct
from engine import store as engine_store
from engine.cli.tree import COMMANDS, GROUP_VERBS
from engine.outbox import enqueue
from tests.support.door import OWNER
from tests.support.procs import PROCESS_TIMEOUT_S, Service, clean_env

pytestmark = pytest.mark.timeout(300)

#: A status that says the command ended quietly: SIGPIPE's, or done before the reader left.
QUIET = (0, 141)
#: Enough rows that `outbox list` and `chief log` print far more than a pipe holds (64 KiB).
MANY = 1500


def into_head(module: str, args: list[str], env: dict[str, str], lines: int) -> tuple[int, str]:
    """`python -m module args... | head -n lines`: the command's exit status and its stderr."""
    writer = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None
    assert writer.stderr is not None
    head = subprocess.Popen(
        ["head", "-n", str(lines)], stdin=writer.stdout, stdout=subprocess.DEVNULL
    )
    writer.stdout.close()  # head alone holds the read end: its exit leaves no reader
    try:
        stderr = writer.stderr.read().decode(errors="replace")
        status = writer.wait(timeout=PROCESS_TIMEOUT_S)
        head.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        for proc in (writer, head):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        writer.stderr.close()
    return status, stderr


def assert_quiet(module: str, args: list[str], env: dict[str, str], lines: int = 0) -> None:
    status, stderr = into_head(module, args, env, lines)
    assert stderr == "", f"{module} {' '.join(args)} said: {stderr[-2000:]}"
    assert status in QUIET, f"{module} {' '.join(args)} exited {status}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A coop.db with todos, a closed request and MANY pending notifications, and a chief.db
    with MANY messages."""
    home = tmp_path_factory.mktemp("pipes")
    env = clean_env(home, COOP_ACTOR="builder", COOP_KICK="off", CHIEF_OWNER=OWNER)
    for args in (
        ["todo", "add", "Water the plants", "--body", "every pot"],
        ["todo", "take", "1"],
        ["todo", "done", "1", "--summary", "watered"],
        ["todo", "add", "Feed the cat"],
        ["request", "add", "Review", "--to", "reviewer", "--body", "the draft"],
        ["request", "close", "1", "--summary", "fine"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "engine", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, (args, done.stderr)
    with direct.connection(home / "coop.db") as conn, engine_store.write(conn):
        for n in range(MANY):
            enqueue(conn, "note", f"notification number {n} " + "x" * 40)
    done = subprocess.run(
        [sys.executable, "-m", "chief", "report", "--source", "cron:pipes", "--wait", "5", "a"],
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(home / "chief.db")) as db, db:
        for _ in range(11):  # 2 ** 11 messages
            db.execute(
                "INSERT INTO messages (chief_id, role, content, turn_kind, origin, created_at)"
                " SELECT chief_id, role, content || ' and more', turn_kind, origin, created_at"
                " FROM messages"
            )
    return home


@pytest.fixture
def env(folder: Path) -> dict[str, str]:
    return clean_env(folder, COOP_ACTOR="builder", COOP_KICK="off", CHIEF_OWNER=OWNER)


#: Every `coop` command that prints a ledger's lines (more than one).
COOP_READS = {
    "list": ["list", "--all"],
    "list --json": ["list", "--all", "--json"],
    "todo show": ["todo", "show", "1"],
    "request show": ["request", "show", "1"],
    "request wait": ["request", "wait", "1", "--timeout", "0"],
    "history todo": ["history", "todo", "1"],
    "history request": ["history", "request", "1"],
    "outbox list": ["outbox", "list"],
    "outbox list --json": ["outbox", "list", "--json"],
    "status": ["status"],
    "status --json": ["status", "--json"],
}


@pytest.mark.parametrize("name", COOP_READS)
def test_a_coop_command_ends_quietly_when_its_reader_goes_away(
    env: dict[str, str], name: str
) -> None:
    assert_quiet("engine", COOP_READS[name], env)


def _coop_helps() -> list[list[str]]:
    """`--help` of `coop`, of every group and of every command."""
    helps = [["--help"]]
    for group, verb in COMMANDS:
        if verb is None:
            helps.append([group, "--help"])
    for group, verbs in GROUP_VERBS.items():
        helps.append([group, "--help"])
        helps += [[group, verb, "--help"] for verb in verbs]
    return helps


CHIEF_HELPS = [
    ["--help"],
    *([command, "--help"] for command in ("log", "report", "telegram", "check-backup")),
    ["telegram", "pair", "--help"],
    ["telegram", "unpair", "--help"],
    ["serve", "--help"],
    ["telegram-emulator", "--help"],
]
NOTIFIER_HELPS = [["--help"], ["serve", "--help"], ["run", "--help"], ["drain", "--help"]]
HELPS = (
    [("engine", args) for args in _coop_helps()]
    + [("chief", args) for args in CHIEF_HELPS]
    + [("notifier", args) for args in NOTIFIER_HELPS]
)


@pytest.mark.parametrize(("module", "args"), HELPS, ids=[" ".join(a) for _, a in HELPS])
def test_every_help_ends_quietly_when_its_reader_goes_away(
    env: dict[str, str], module: str, args: list[str]
) -> None:
    assert_quiet(module, args, env)


@pytest.mark.parametrize("args", [["log"], ["log", "--json"]])
def test_chief_log_ends_quietly_when_its_reader_goes_away(
    env: dict[str, str], args: list[str]
) -> None:
    assert_quiet("chief", args, env)


def test_the_operators_copies_end_quietly_when_their_reader_goes_away(
    env: dict[str, str], folder: Path, tmp_path: Path
) -> None:
    # `coop backup` prints what it wrote and each table's rows; `chief check-backup` its checks
    # of a backup's chief.db (one self-contained file, as a backup's copy is).
    backups = tmp_path / "backups"
    assert_quiet("engine", ["backup", str(backups)], env)
    [copy] = backups.glob("*/chief.db")
    assert_quiet("chief", ["check-backup", str(copy)], env)


@pytest.mark.parametrize(
    ("module", "args"),
    [("chief", ["log"]), ("engine", ["outbox", "list"]), ("engine", ["list", "--all"])],
)
def test_a_long_output_into_head_1_ends_quietly_every_time(
    env: dict[str, str], module: str, args: list[str]
) -> None:
    # The issue's own commands: `chief log | head -1` (a traceback 2 runs of 3) and
    # `coop outbox list | head -3` (`coop: Broken pipe`, exit 1), three runs each.
    for _ in range(3):
        assert_quiet(module, args, env, lines=1)


def test_telegram_pair_ends_quietly_when_its_reader_goes_away(tmp_path: Path) -> None:
    # `chief telegram pair` prints the bot's name and the code, flushed, then waits for the
    # owner: its reader gone, it ends there quietly (it said "the pairing could not be saved
    # ... Broken pipe", as though a file had failed).
    token = "123456:pipes-token"
    emulator = Service(
        "emulator",
        ["chief", "telegram-emulator", "--host", "127.0.0.1", "--token", token],
        tmp_path,
        "emulator.listening",
        clean_env(tmp_path),
    )
    emulator.start()
    try:
        env = clean_env(
            tmp_path / "home",
            TELEGRAM_BOT_TOKEN=token,
            TELEGRAM_API_BASE=f"{emulator.url}/bot",
            CHIEF_OWNER=OWNER,
        )
        assert_quiet("chief", ["telegram", "pair", "--timeout", "5"], env)
    finally:
        emulator.kill()
