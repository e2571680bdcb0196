"""Hostile input, one case each (issue 19, "Hostile input, all of it"): bytes that are not UTF-8,
integers past SQLite's 64 bits, durations that are not numbers, names that end in a newline and
owner files that are not what they claim. Each prints one line (two with a detail), exits with
the CLI's usage or refusal status and writes nothing. The entry points are called in-process
(`main(argv)`, the console scripts' own code): Python hands a process's argv to `main` with the
bytes that are not UTF-8 as lone surrogates (`surrogateescape`), which is what these tests pass;
tests/e2e/cli/test_hostile_argv.py runs the real processes.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from chief import cli as chief_cli
from chief.cron import FIRE_ID, JOB_NAME, cron_source_id
from chief.door.config import DoorConfig
from chief.errors import ChiefInputError, DoorError
from engine import owner_file, status
from engine.cli import main as coop_main
from engine.config import EngineConfig
from engine.door import door_status
from engine.errors import OwnerUnavailable, UsageError
from tests.support.door import write_key

#: A byte that is never UTF-8 (0xff), as Python's argv carries it.
NOT_UTF8 = "\udcff"
TOO_BIG = str(2**63)  # one past SQLite's largest integer


@pytest.fixture(autouse=True)
def _logging_kept() -> Iterator[None]:
    """`chief report` configures structlog for its process (warnings only); in this process the
    configuration goes back as it was, or a later test's captured log would miss its events."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data folder for both CLIs; no kicks, no door, no inherited settings."""
    for name in ("COOP_DB", "COOP_OWNER_FILE", "COOP_SERVICE_KEY_FILE", "CHIEF_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COOP_HOME", str(tmp_path))
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "builder")
    monkeypatch.setenv("CHIEF_OWNER", "owner")
    monkeypatch.delenv("COOP_STATUS_MAX_PENDING_AGE_S", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(main: object, argv: list[str]) -> tuple[int, str, str]:
    """`main(argv)`: its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)  # type: ignore[operator]
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def rows(db: Path) -> dict[str, int]:
    """Every table's row count: what a refused command must leave as it was."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}


@pytest.fixture
def ledger(home: Path) -> Path:
    """A ledger holding one todo (taken), one request and one queued notification."""
    for argv in (["todo", "add", "x"], ["todo", "take", "1"], ["request", "add", "r"]):
        assert run(coop_main, argv)[0] == 0
    assert run(coop_main, ["notify", "hello"])[0] == 0
    return home / "coop.db"


def assert_refused(result: tuple[int, str, str], status: int, *words: str) -> None:
    code, out, err = result
    assert "Traceback" not in err
    assert code == status, err
    assert out == ""
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, err
    for word in words:
        assert word in lines[0], err


# ---- coop: bytes that are not UTF-8 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["notify", NOT_UTF8], "TEXT"),
        (["notify", "hi", "--kind", NOT_UTF8], "--kind"),
        (["todo", "add", f"plants {NOT_UTF8}"], "TITLE"),
        (["todo", "add", "x", "--body", NOT_UTF8], "--body"),
        (["todo", "done", "1", "--summary", NOT_UTF8], "--summary"),
        (["todo", "release", "1", "--reason", NOT_UTF8], "--reason"),
        (["request", "add", "r", "--to", NOT_UTF8], "--to"),
        (["outbox", "cancel", "1", "--reason", NOT_UTF8], "--reason"),
        (["--as", NOT_UTF8, "todo", "add", "x"], "--as"),
        (["reconcile", NOT_UTF8], "KEY"),
    ],
)
def test_coop_names_the_argument_that_is_not_utf8_and_writes_nothing(
    ledger: Path, argv: list[str], named: str
) -> None:
    before = rows(ledger)
    assert_refused(run(coop_main, argv), 2, named, "not valid UTF-8")
    assert rows(ledger) == before


# ---- coop: integers past 64 bits -------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["todo", "take", TOO_BIG],
        ["todo", "done", TOO_BIG],
        ["todo", "release", TOO_BIG, "--reason", "r"],
        ["todo", "abandon", TOO_BIG, "--reason", "r"],
        ["request", "take", TOO_BIG],
        ["request", "close", TOO_BIG],
        ["history", "todo", TOO_BIG],
        ["history", "request", str(-(2**63) - 1)],
        ["outbox", "retry", TOO_BIG],
        ["outbox", "cancel", TOO_BIG, "--reason", "r"],
        ["outbox", "list", "--limit", str(10**23)],
    ],
)
def test_coop_refuses_an_integer_past_64_bits_in_one_line(ledger: Path, argv: list[str]) -> None:
    before = rows(ledger)
    assert_refused(run(coop_main, argv), 2, "out of range")
    assert rows(ledger) == before


def test_coop_still_takes_the_largest_64_bit_id_and_says_it_does_not_exist(ledger: Path) -> None:
    assert_refused(run(coop_main, ["todo", "take", str(2**63 - 1)]), 2, "does not exist")


# ---- coop status: durations ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "infinity", "0", "-5"])
def test_coop_status_refuses_a_max_pending_age_that_is_not_a_positive_number(
    home: Path, value: str
) -> None:
    assert_refused(run(coop_main, ["status", "--check", "--max-pending-age", value]), 2)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "ten"])
def test_the_max_pending_age_setting_refuses_what_is_not_a_positive_number(value: str) -> None:
    with pytest.raises(UsageError, match="COOP_STATUS_MAX_PENDING_AGE_S"):
        status.max_pending_age(None, {"COOP_STATUS_MAX_PENDING_AGE_S": value})


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_the_stale_after_setting_refuses_what_is_not_a_positive_number(value: str) -> None:
    with pytest.raises(UsageError, match="COOP_STALE_AFTER_S"):
        EngineConfig.from_env({"COOP_STALE_AFTER_S": value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("COOP_CLIENT_TIMEOUT_S", "inf"),
        ("COOP_CLIENT_TIMEOUT_S", "nan"),
        ("TELEGRAM_TIMEOUT_S", "inf"),
        ("TELEGRAM_TIMEOUT_S", "nan"),
    ],
)
def test_the_doors_durations_refuse_nan_and_infinity(tmp_path: Path, name: str, value: str) -> None:
    key = write_key(tmp_path)
    env = {"COOP_HOME": str(tmp_path), "COOP_SERVICE_KEY_FILE": str(key), name: value}
    if name == "TELEGRAM_TIMEOUT_S":
        env["COOP_CLIENT_TIMEOUT_S"] = "inf"  # the bound TELEGRAM_TIMEOUT_S is held to
    with pytest.raises(DoorError, match=r"COOP_CLIENT_TIMEOUT_S|TELEGRAM_TIMEOUT_S"):
        DoorConfig.from_env(env)


@pytest.mark.parametrize("value", ["99999", "65536", "-1", "nope"])
def test_the_doors_port_setting_refuses_what_is_not_a_port(tmp_path: Path, value: str) -> None:
    key = write_key(tmp_path)
    # The door's one port left: /metrics (the door itself is on its socket; CHIEF_PORT is
    # refused whatever its value, tests/unit/door).
    env = {"COOP_HOME": str(tmp_path), "COOP_SERVICE_KEY_FILE": str(key)}
    env["CHIEF_METRICS_PORT"] = value
    with pytest.raises(DoorError, match="CHIEF_METRICS_PORT"):
        DoorConfig.from_env(env)


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_the_telegram_api_base_refuses_a_port_past_65535(tmp_path: Path, port: str) -> None:
    """The Bot API client took port 99999 modulo 65536 and asked port 34463."""
    key = write_key(tmp_path)
    env = {
        "COOP_HOME": str(tmp_path),
        "COOP_SERVICE_KEY_FILE": str(key),
        "TELEGRAM_API_BASE": f"http://127.0.0.1:{port}/bot",
    }
    with pytest.raises(DoorError, match="TELEGRAM_API_BASE"):
        DoorConfig.from_env(env)


def test_coop_status_names_a_door_url_whose_port_is_past_65535(tmp_path: Path) -> None:
    """urllib took port 99999 modulo 65536 and asked port 34463."""
    write_key(tmp_path)
    url = "http://127.0.0.1:99999/api/coop/engine/notify"
    answer = door_status({"COOP_HOME": str(tmp_path), "COOP_DOOR_URL": url})
    assert answer["answered"] is False
    assert "COOP_DOOR_URL" in answer["error"]


# ---- chief log and chief report --------------------------------------------------------------


@pytest.fixture
def chief_db(home: Path) -> Path:
    """chief.db with one line in the owner's conversation."""
    assert run(chief_cli.main, ["report", "--source", "cron:seed", "--fire", "1", "seed"])[0] == 0
    return home / "chief.db"


def test_chief_log_names_an_owner_that_is_not_utf8(chief_db: Path) -> None:
    assert_refused(run(chief_cli.main, ["log", "--owner", NOT_UTF8]), 2, "--owner", "UTF-8")


@pytest.mark.parametrize("limit", [TOO_BIG, str(10**23)])
def test_chief_log_refuses_a_limit_past_64_bits(chief_db: Path, limit: str) -> None:
    assert_refused(run(chief_cli.main, ["log", "--limit", limit]), 2, "--limit")


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--source", "cron:backup\n", "--fire", "1", "line"],
        ["report", "--source", "cron:backup", "--fire", "1\n", "line"],
        ["report", "--source", f"cron:{NOT_UTF8}", "--fire", "1", "line"],
        ["report", "--source", "cron:backup", "--fire", NOT_UTF8, "line"],
        ["report", "--source", "cron:backup", "--fire", "1", NOT_UTF8],
        ["report", "--source", "cron:backup", "--fire", "1", "--wait", "nan", "line"],
        ["report", "--source", "cron:backup", "--fire", "1", "--wait", "inf", "line"],
    ],
)
def test_chief_report_refuses_each_bad_name_and_writes_nothing(
    chief_db: Path, argv: list[str]
) -> None:
    before = rows(chief_db)
    assert_refused(run(chief_cli.main, argv), 2)
    assert rows(chief_db) == before


@pytest.mark.parametrize("name", ["backup\n", "backup\r\n", "\nbackup", "a" * 65])
def test_a_job_name_with_a_newline_is_not_a_name(name: str) -> None:
    assert not JOB_NAME.fullmatch(name)
    with pytest.raises(ChiefInputError):
        cron_source_id(f"cron:{name}", "1")
    with pytest.raises(ChiefInputError):
        cron_source_id("cron:backup", name.replace("a", "1"))
    assert not FIRE_ID.fullmatch(name)


def test_chief_report_from_stdin_refuses_more_than_it_carries_without_reading_it_all(
    chief_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 MB of stdin took 409 MB of memory before it was refused; now at most the limit (in
    bytes, 4 per character) and one byte more are read."""

    class Endless(io.RawIOBase):
        served = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            assert self.served < 1_000_000, "stdin was read far past the limit"
            buffer[:] = b"x" * len(buffer)
            self.served += len(buffer)
            return len(buffer)

    endless = Endless()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BufferedReader(endless)))
    before = rows(chief_db)
    assert_refused(
        run(chief_cli.main, ["report", "--source", "cron:big", "--fire", "1", "-"]), 2, "4000"
    )
    assert endless.served < 100_000
    assert rows(chief_db) == before


def test_chief_report_from_stdin_refuses_bytes_that_are_not_utf8(
    chief_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9 \xff\n")))
    before = rows(chief_db)
    assert_refused(
        run(chief_cli.main, ["report", "--source", "cron:b", "--fire", "1", "-"]), 2, "UTF-8"
    )
    assert rows(chief_db) == before


def test_chief_report_from_stdin_lands_a_line_of_exactly_the_limit(
    chief_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "é" * 3999 + "😀"  # 4000 characters, 8002 bytes
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, err = run(chief_cli.main, ["report", "--source", "cron:b", "--fire", "2", "-"])
    assert (code, err) == (0, ""), err
    assert "landed" in out


# ---- the owner file --------------------------------------------------------------------------


@pytest.fixture
def owner_path(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COOP_DB", str(home / "coop.db"))
    return home / "coop.db.owner.json"


BROKEN_OWNER_FILES = {
    "NUL in the database": lambda home: json.dumps({"mode": "service", "database": "/a\x00b"}),
    "surrogate in the database": lambda home: json.dumps({"mode": "service", "database": "\ud800"}),
    "deeply nested": lambda home: "[" * 100_000 + "]" * 100_000,
    "deeply nested object": lambda home: '{"a":' * 100_000 + "1" + "}" * 100_000,
    "NUL in the credential": lambda home: json.dumps(
        {"mode": "service", "database": str(home / "coop.db"), "credential_file": "/k\x00"}
    ),
    "credential not text": lambda home: json.dumps(
        {"mode": "service", "database": str(home / "coop.db"), "credential_file": ["x"]}
    ),
    "socket not text": lambda home: json.dumps(
        {"mode": "service", "database": str(home / "coop.db"), "socket": 8764}
    ),
}


@pytest.mark.parametrize("variant", sorted(BROKEN_OWNER_FILES))
def test_every_broken_owner_file_says_the_exact_words(
    owner_path: Path, home: Path, variant: str
) -> None:
    owner_path.write_text(BROKEN_OWNER_FILES[variant](home), encoding="utf-8")
    owner_path.chmod(0o600)  # private: broken inside only
    with pytest.raises(OwnerUnavailable) as caught:
        owner_file.owner_config(home / "coop.db")
    assert str(caught.value) == owner_file.INVALID_OWNER
    assert caught.value.detail
    code, out, err = run(coop_main, ["list"])
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == f"coop: {owner_file.INVALID_OWNER}", err
    assert len(err.splitlines()) == 2
    assert not (home / "coop.db").exists()


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_owner_file_that_is_not_a_regular_file_is_the_exact_words_at_once(
    owner_path: Path, home: Path, kind: str
) -> None:
    """A FIFO at the owner file's path blocked every caller in `open()` for good."""
    if kind == "fifo":
        os.mkfifo(owner_path)
    else:
        owner_path.mkdir()
    answer: list[BaseException | object] = []
    reader = threading.Thread(target=lambda: answer.append(_owner_answer(home)), daemon=True)
    reader.start()
    reader.join(5.0)
    if reader.is_alive() and kind == "fifo":
        with open(owner_path, "wb"):  # let the blocked reader go before failing
            pass
    assert not reader.is_alive(), "reading the owner file blocked"
    assert isinstance(answer[0], OwnerUnavailable)
    assert str(answer[0]) == owner_file.INVALID_OWNER


def _owner_answer(home: Path) -> BaseException | object:
    try:
        return owner_file.owner_config(home / "coop.db")
    except Exception as exc:  # the test judges whatever came out
        return exc


def test_the_64_bit_bound_is_one_fact_in_its_three_places() -> None:
    """The CLI's refusal, the owner's argument check and `chief log --limit` hold integers to the
    same bound: SQLite's INTEGER (the packages share no code, so it is written three times)."""
    from chief.cli import MAX_WHOLE_NUMBER
    from engine.cli.tree import INT64_MAX, INT64_MIN
    from engine.owner.arguments import SQLITE_INTEGER_MAX, SQLITE_INTEGER_MIN

    assert (INT64_MIN, INT64_MAX) == (SQLITE_INTEGER_MIN, SQLITE_INTEGER_MAX)
    assert MAX_WHOLE_NUMBER == SQLITE_INTEGER_MAX == 2**63 - 1
