"""`coop backup DIR` and `coop restore DIR` as an operator runs them: real `coop` processes on
real SQLite files in a temporary data folder, a real process holding the ledger's lock.

The delivery promises after a restore (a delivered row not rung again, a new row delivered) are
checked on the whole running stack in tests/e2e/proof/test_proof_restore.py.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.support.procs import clean_env, coop, run_module

READY = "holding\n"
#: The data folder's owner in the restore-as-root test: any user but root (here `nobody`).
SERVICE_UID = 65534
#: Starts a process holding a lock: (module, class, path, extra arguments) -> its pid.
Hold = Callable[[str, str, Path, str], int]
#: A real process that takes a lock file the way its owner does, and holds it until stdin closes.
HOLDER = """
import sys
from pathlib import Path
from {module} import {cls}
lock = {cls}(Path(sys.argv[1]){args})
assert lock.try_acquire()
print("holding", flush=True)
sys.stdin.read()
"""


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return coop(*args, env=clean_env(home, COOP_KICK="off", COOP_ACTOR="builder"), inherit=False)


def rows(db: Path, table: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def one_line(done: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert done.returncode == status, done
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder with a ledger (two todos, a queued notification) and a Chief's chief.db."""
    home = tmp_path_factory.mktemp("seed") / "home"
    home.mkdir(mode=0o700)
    for argv in (("todo", "add", "one"), ("todo", "add", "two"), ("notify", "hello")):
        assert run(home, *argv).returncode == 0
    landed = run_module(
        "chief",
        ["report", "--source", "cron:backup", "--fire", "1", "a cron line"],
        env=clean_env(home, CHIEF_OWNER="owner"),
        inherit=False,
    )
    assert landed.returncode == 0, landed.stderr
    return home


@pytest.fixture
def ledger(seeded: Path, tmp_path: Path) -> Path:
    """A copy of the seeded data folder, the test's own."""
    return Path(shutil.copytree(seeded, tmp_path / "home"))


@pytest.fixture
def holding(ledger: Path) -> Iterator[Hold]:
    started: list[subprocess.Popen[str]] = []

    def hold(module: str, cls: str, path: Path, args: str = "") -> int:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER.format(module=module, cls=cls, args=args), str(path)],
            env=clean_env(ledger),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline() == READY
        return proc.pid

    yield hold
    for proc in started:
        proc.communicate(timeout=30)


def test_a_backup_without_a_ledger_refuses_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    home.mkdir()
    target = tmp_path / "backups"
    line = one_line(run(home, "backup", str(target)))
    assert line == f"coop: no ledger at {home}/coop.db (COOP_HOME={home}): nothing to back up" + (
        " (set COOP_HOME or --db to the ledger)"
    )
    assert not target.exists()
    assert list(home.iterdir()) == []


def test_a_backup_copies_both_databases_checked_into_a_private_folder(
    ledger: Path, tmp_path: Path
) -> None:
    target = tmp_path / "backups"
    done = run(ledger, "backup", str(target))
    assert done.returncode == 0, done.stderr
    (folder,) = target.iterdir()
    assert folder.name.startswith("coop-backup-")
    assert (mode(target), mode(folder)) == (0o700, 0o700)
    assert sorted(p.name for p in folder.iterdir()) == ["chief.db", "coop.db"]
    for name in ("coop.db", "chief.db"):
        copy = folder / name
        assert mode(copy) == 0o600
        with closing(sqlite3.connect(copy)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert f"wrote {copy} from {ledger / name} (integrity ok; rows: " in done.stdout
    assert rows(folder / "coop.db", "todos") == rows(ledger / "coop.db", "todos")
    assert "coop_outbox 1," in done.stdout
    assert "todos 2" in done.stdout
    assert f"`coop restore {folder}`" in done.stdout


def test_a_restore_puts_the_backup_back_and_says_what_is_sent_again_and_gone(
    ledger: Path, tmp_path: Path
) -> None:
    assert run(ledger, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    before = rows(ledger / "coop.db", "todos")
    assert run(ledger, "todo", "add", "after the backup").returncode == 0
    assert run(ledger, "notify", "after the backup").returncode == 0
    assert run(ledger, "request", "add", "filed after the backup").returncode == 0

    # The parent folder holds backups: the operator is told to name one.
    assert one_line(run(ledger, "restore", str(tmp_path / "b")), 2).endswith(
        f"`coop restore {folder}`"
    )
    done = run(ledger, "restore", str(folder))
    assert done.returncode == 0, done.stderr
    assert rows(ledger / "coop.db", "todos") == before
    said = done.stdout
    assert "sent again: 1 outbox row pending in the backup" in said
    assert "gone: 1 todo, 1 request, " in said
    assert "a request filed after the backup may still be asked on the phone" in said
    assert "chief.db left as it is" in said
    # The restored ledger is the engine's as before: a verb works on it.
    assert run(ledger, "todo", "add", "after the restore").returncode == 0


def test_a_restore_refuses_while_a_process_holds_the_ledger(
    ledger: Path, tmp_path: Path, holding: Hold
) -> None:
    assert run(ledger, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    assert run(ledger, "todo", "add", "kept").returncode == 0
    kept = rows(ledger / "coop.db", "todos")
    pid = holding("notifier.pidlock", "PidLock", ledger / "coop.db.notifier.lock", ", 'x'")
    line = one_line(run(ledger, "restore", str(folder)))
    assert line.startswith(f"coop: a notifier daemon (`coop-notifier run`) (pid {pid}) holds ")
    assert rows(ledger / "coop.db", "todos") == kept


def test_a_restore_with_chief_refuses_while_the_door_holds_chief_db(
    ledger: Path, tmp_path: Path, holding: Hold
) -> None:
    assert run(ledger, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    pid = holding("chief.serve_lock", "ServeLock", ledger / "chief.db")
    line = one_line(run(ledger, "restore", str(folder), "--with-chief"))
    assert f"(pid {pid}) holds {ledger}/chief.db" in line
    done = run(ledger, "restore", str(folder))  # without --with-chief the door may run
    assert done.returncode == 0, done.stderr


def test_a_restore_says_what_restoring_chief_db_means(ledger: Path, tmp_path: Path) -> None:
    assert run(ledger, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    done = run(ledger, "restore", str(folder), "--with-chief")
    assert done.returncode == 0, done.stderr
    assert "the door forgets what it took after the backup" in done.stdout


def test_the_data_folder_is_not_a_backup_of_itself(ledger: Path) -> None:
    assert one_line(run(ledger, "restore", str(ledger)), 2) == (
        f"coop: {ledger} is the data folder itself, not a backup of it"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the restore as root not run here")
def test_a_restore_run_as_root_on_the_service_users_folder_is_refused_naming_that_user(
    ledger: Path, tmp_path: Path
) -> None:
    """Root would leave files the service's user cannot open, and follow that user's links: it
    is sent to run the restore as that user (tests/integration/trust covers the links)."""
    assert run(ledger, "backup", str(tmp_path / "b")).returncode == 0
    (folder,) = (tmp_path / "b").iterdir()
    for leftover in ledger.glob("coop.db*"):
        leftover.unlink()  # a new machine: no ledger, no lock files
    for path in (ledger, *ledger.iterdir()):
        os.chown(path, SERVICE_UID, SERVICE_UID)
    before = sorted(p.name for p in ledger.iterdir())
    line = one_line(run(ledger, "restore", str(folder)))
    assert line == (
        f"coop: {ledger} belongs to nobody, not root: run it as that user,"
        f" `sudo -u nobody coop restore {folder}` (root would follow that user's links, and"
        " leave files the service cannot open)"
    )
    assert sorted(p.name for p in ledger.iterdir()) == before
