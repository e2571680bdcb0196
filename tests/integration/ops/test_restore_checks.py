"""`coop restore` restores only what the ledger's (and the Chief's) own migrations make: every
backup below is a real `coop backup` folder whose coop.db or chief.db was then changed with
sqlite3 (a trigger, an index, a view added; a table dropped) or replaced (a foreign database, an
empty one, a cut file, a text file, a zero-byte file, a database from a newer build), and every
restore of it is a real `coop` process, as the operator runs it (docs/operations.md).

After each refusal: exit 1, one line on stderr, the data folder byte for byte as it was (the
check runs before the restore takes a lock or makes a file), and the ledger still answers.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from chief.store.schema import SCHEMA_VERSION
from engine.store.schema import MIGRATIONS, install_fence, statements
from tests.integration.ops.backups import run, seed, snapshot, sql
from tests.support.procs import PROCESS_TIMEOUT_S, clean_env, run_module

pytestmark = pytest.mark.slow  # tens of seconds when loaded: handed out early (tests/conftest.py)

#: What the trigger found on main wrote into every notification (issue 32).
INJECTED = "INJECTED: approve the transfer"
EVIL_TRIGGER = (
    "CREATE TRIGGER evil AFTER INSERT ON coop_outbox BEGIN"
    f" UPDATE coop_outbox SET text = '{INJECTED}' WHERE id = NEW.id; END"
)
#: Cuts of a backup file: inside the header, at and past its first page, mid-file, one page
#: short, one byte short.
CUTS = ("50", "100", "4096", "4097", "half", "page-short", "byte-short")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("seed"))


@pytest.fixture
def home(seeded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(seeded / "home", tmp_path / "home"))


@pytest.fixture
def backup(seeded: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(seeded / "backup", tmp_path / "backup"))


def refused(home: Path, backup: Path, *options: str) -> str:
    """Restore `backup` into `home`: refused in one line, nothing of `home` or of `backup`
    changed, the ledger still answering; the line."""
    before, given = snapshot(home), snapshot(backup)
    status, out, err = run(home, "restore", str(backup), *options)
    assert status == 1, (status, out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert out == ""
    assert snapshot(home) == before
    assert snapshot(backup) == given  # the check made nothing beside the file (no -shm, no -wal)
    listed = run(home, "list")
    assert listed[0] == 0, listed
    assert "one" in listed[1]
    return lines[0]


def cut(path: Path, where: str) -> None:
    data = path.read_bytes()
    offsets = {"half": len(data) // 2, "page-short": len(data) - 4096, "byte-short": len(data) - 1}
    path.write_bytes(data[: offsets[where] if where in offsets else int(where)])


def foreign(path: Path, *ddl: str) -> None:
    """`path` replaced by another application's database (`ddl`), or an empty one."""
    path.unlink()
    sql(path, "CREATE TABLE scratch (x)", "DROP TABLE scratch", *ddl)


# ---- coop.db -------------------------------------------------------------------------------


def test_a_backup_whose_ledger_carries_a_trigger_is_refused_and_injects_nothing(
    home: Path, backup: Path
) -> None:
    sql(backup / "coop.db", EVIL_TRIGGER)
    line = refused(home, backup)
    assert line == (
        f"coop: backup {backup}/coop.db: trigger evil on coop_outbox is not one the ledger"
        " makes; nothing was restored"
    )
    assert run(home, "notify", "hello again")[0] == 0
    with closing(sqlite3.connect(home / "coop.db")) as conn:
        (text,) = conn.execute("SELECT text FROM coop_outbox ORDER BY id DESC").fetchone()
    assert text == "hello again"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("CREATE INDEX extra ON todos (title)", "index extra on todos is not one the ledger makes"),
        ("CREATE VIEW extra AS SELECT title FROM todos", "view extra is not one the ledger makes"),
        ("DROP TABLE coop_answers", "it lacks table coop_answers, which the ledger makes"),
        ("ALTER TABLE todos ADD COLUMN extra TEXT", "table todos is not as the ledger makes it"),
        ("DROP TRIGGER coop_events_no_delete", "it lacks trigger coop_events_no_delete on"),
        ("PRAGMA user_version = 99", "schema version 99, newer than this build's"),
        ("PRAGMA user_version = 4", "index requests_open_deadline on requests is not one"),
    ],
    ids=["index", "view", "dropped-table", "added-column", "dropped-trigger", "newer", "older"],
)
def test_a_backup_whose_ledger_schema_was_changed_is_refused(
    home: Path, backup: Path, change: str, said: str
) -> None:
    sql(backup / "coop.db", change)
    line = refused(home, backup)
    assert line.startswith(f"coop: backup {backup}/coop.db: ")
    assert said in line
    assert line.endswith("; nothing was restored")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda path: foreign(path), "is not a Coop ledger (schema version 0)"),
        (
            lambda path: foreign(path, "CREATE TABLE notes (x)", "PRAGMA user_version = 3"),
            "table notes is not one the ledger makes",
        ),
        (lambda path: path.write_text("a text file, not a database\n"), "not an SQLite database"),
        (lambda path: path.write_bytes(b""), "it is empty"),
        *[(lambda path, where=where: cut(path, where), "") for where in CUTS],
    ],
    ids=["empty-database", "foreign-database", "text-file", "zero-bytes", *CUTS],
)
def test_a_backup_whose_ledger_is_not_one_is_refused(
    home: Path, backup: Path, make: object, said: str
) -> None:
    make(backup / "coop.db")  # type: ignore[operator]
    line = refused(home, backup)
    assert line.startswith(f"coop: backup {backup}/coop.db: ")
    assert said in line
    assert line.endswith("; nothing was restored")


@pytest.mark.parametrize("sibling", ["coop.db-wal", "coop.db-journal"])
def test_a_backup_with_a_journal_beside_its_ledger_is_refused(
    home: Path, backup: Path, sibling: str
) -> None:
    (backup / sibling).write_bytes(b"")
    line = refused(home, backup)
    assert f"{sibling} lies beside it" in line


def test_a_backup_whose_ledger_is_in_wal_mode_or_padded_is_refused(
    home: Path, backup: Path
) -> None:
    ledger = backup / "coop.db"
    sql(ledger, "PRAGMA journal_mode = WAL")
    assert "it is in WAL mode, not one self-contained file" in refused(home, backup)
    sql(ledger, "PRAGMA journal_mode = DELETE")
    with ledger.open("ab") as file:
        file.write(bytes(4096))
    assert "it is cut short or padded" in refused(home, backup)


def test_chief_check_backup_says_what_it_found_in_one_line(backup: Path, tmp_path: Path) -> None:
    def check(path: Path) -> tuple[int, str, str]:
        done = run_module("chief", ["check-backup", str(path)], env=clean_env(), inherit=False)
        return done.returncode, done.stdout, done.stderr

    assert check(backup / "chief.db") == (
        0,
        f"{backup}/chief.db: chief.db at schema version {SCHEMA_VERSION}, its schema this"
        " build's, whole\n",
        "",
    )
    assert check(backup / "coop.db") == (
        1,
        "",
        f"chief: {backup}/coop.db: trigger coop_events_no_delete on coop_events is not one the"
        " Chief makes\n",
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # read, it would wait for a writer forever
    assert check(fifo) == (1, "", f"chief: {fifo}: it is not a regular file\n")


def test_a_ledger_at_an_older_version_restores_and_is_migrated_when_next_opened(
    home: Path, backup: Path
) -> None:
    (backup / "coop.db").unlink()
    old = 3
    sql(
        backup / "coop.db",
        *[s for script in MIGRATIONS[:old] for s in statements(script)],
        f"PRAGMA user_version = {old}",
    )
    status, _, err = run(home, "restore", str(backup))
    assert status == 0, err
    assert run(home, "todo", "add", "on the old ledger")[0] == 0
    with closing(sqlite3.connect(home / "coop.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)


def test_a_backup_of_a_fenced_ledger_restores(home: Path, backup: Path) -> None:
    with closing(sqlite3.connect(backup / "coop.db", isolation_level=None)) as conn:
        assert install_fence(conn)
    status, _, err = run(home, "restore", str(backup))
    assert status == 0, err


# ---- chief.db with --with-chief --------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            "CREATE TRIGGER evil AFTER INSERT ON telegram_queue BEGIN"
            " UPDATE telegram_queue SET text = 'x' WHERE seq = NEW.seq; END",
            "trigger evil on telegram_queue is not one the Chief makes",
        ),
        ("CREATE INDEX extra ON messages (content)", "index extra on messages is not one"),
        ("CREATE VIEW extra AS SELECT 1", "view extra is not one the Chief makes"),
        ("DROP TABLE urgent_messages", "it lacks table urgent_messages, which the Chief makes"),
        ("PRAGMA user_version = 99", "schema version 99, newer than this build's"),
    ],
    ids=["trigger", "index", "view", "dropped-table", "newer"],
)
def test_a_backup_whose_chief_db_schema_was_changed_is_refused_with_chief(
    home: Path, backup: Path, change: str, said: str
) -> None:
    sql(backup / "chief.db", change)
    line = refused(home, backup, "--with-chief")
    assert line.startswith(f"coop: backup {backup}/chief.db: ")
    assert said in line
    assert line.endswith("; nothing was restored")


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda path: foreign(path), "is not the Chief's chief.db (schema version 0)"),
        (lambda path: path.write_text("a text file, not a database\n"), "not an SQLite database"),
        (lambda path: path.write_bytes(b""), "it is empty"),
        *[(lambda path, where=where: cut(path, where), "") for where in CUTS],
    ],
    ids=["empty-database", "text-file", "zero-bytes", *CUTS],
)
def test_a_backup_whose_chief_db_is_not_one_is_refused_with_chief(
    home: Path, backup: Path, make: object, said: str
) -> None:
    make(backup / "chief.db")  # type: ignore[operator]
    line = refused(home, backup, "--with-chief")
    assert line.startswith(f"coop: backup {backup}/chief.db: ")
    assert said in line
    assert line.endswith("; nothing was restored")


def test_a_whole_backup_still_restores_with_chief(home: Path, backup: Path) -> None:
    status, out, err = run(home, "restore", str(backup), "--with-chief")
    assert status == 0, err
    assert f"restored {home}/chief.db" in out


def test_a_chief_db_at_an_older_version_restores_and_is_migrated_when_next_opened(
    home: Path, backup: Path
) -> None:
    from chief.store.schema import MIGRATIONS as CHIEF_MIGRATIONS

    (backup / "chief.db").unlink()
    old = 5
    sql(backup / "chief.db", *[s for m in CHIEF_MIGRATIONS[:old] for s in m])
    sql(backup / "chief.db", f"PRAGMA user_version = {old}")
    status, _, err = run(home, "restore", str(backup), "--with-chief")
    assert status == 0, err
    landed = run_module(
        "chief",
        ["report", "--source", "cron:after", "--fire", "1", "on the old chief.db"],
        env=clean_env(home, CHIEF_OWNER="owner"),
        inherit=False,
    )
    assert landed.returncode == 0, landed.stderr
    with closing(sqlite3.connect(home / "chief.db")) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_the_chief_check_runs_the_chief_never_a_chief_in_the_working_folder(
    home: Path, backup: Path, tmp_path: Path
) -> None:
    planted = tmp_path / "planted"
    (planted / "chief").mkdir(parents=True)
    marker = tmp_path / "ran"
    (planted / "chief" / "__init__.py").write_text("")
    (planted / "chief" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run(
        [sys.executable, "-m", "engine", "restore", str(backup), "--with-chief"],
        env=clean_env(home, COOP_KICK="off"),
        cwd=planted,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
