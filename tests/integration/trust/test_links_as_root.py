"""Root never writes through a link, nor into another user's folder: `coop restore`, `coop
status`, `coop backup`, `coop-notifier` and `chief` run as root (real processes) against a data
folder a throwaway user owns, in which that user pointed every name the product writes at a file
of root's or at a missing path. Each refuses in one line naming `sudo -u OWNER ...` (why refuse
rather than switch users: plumbing/files.py), and no root file changes mode, owner or bytes, and
nothing appears where a link points.

`coop backup DIR` refuses a DIR another user owns or can write (its folder could be renamed away
and a link put in its place), and writes nothing there.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.trust.conftest import Stranger, Vault, give, plant
from tests.support.procs import clean_env, coop, run_module, write_key

pytestmark = pytest.mark.slow  # tens of seconds when loaded: handed out early (tests/conftest.py)

#: The names these commands write in a data folder beside the ledger. The trusted files (the
#: owner file, a key, chief.db itself) stop a command before it writes when they are links, so
#: they are planted one at a time in test_every_written_name.py.
PLANTED = (
    "coop.db-wal",
    "coop.db-shm",
    "coop.db.serve.lock",
    "coop.db.notifier.lock",
    "coop.db.drain-wait.lock",
    "coop.db.drainer.log",
    "chief.db-wal",
    "chief.db-shm",
    "chief.db.serve.lock",
)
KINDS = ("root file", "missing path")


def env(data: Path) -> dict[str, str]:
    return clean_env(data, COOP_KICK="off", COOP_ACTOR="builder", CHIEF_METRICS_PORT="off")


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _ledger_and_backup(base: Path) -> tuple[Path, Path]:
    """A data folder with a ledger (made by root, then handed over) and a backup of it."""
    data = base / "data"
    data.mkdir(mode=0o700)
    assert coop("todo", "add", "kept", env=env(data), inherit=False).returncode == 0
    made = coop("backup", str(base / "backups"), env=env(data), inherit=False)
    assert made.returncode == 0, made.stderr
    (backup,) = (base / "backups").iterdir()
    for leftover in data.iterdir():
        if leftover.name != "coop.db":
            leftover.unlink()
    return data, backup


@pytest.fixture(params=KINDS)
def planted(
    request: pytest.FixtureRequest, base: Path, stranger: Stranger, vault: Vault
) -> tuple[Path, Path]:
    """The stranger's data folder, each name in PLANTED a link of theirs (to a root file, or to
    a missing path in root's vault), and a backup root took of it before."""
    data, backup = _ledger_and_backup(base)
    give(data, stranger)
    targets = {
        data / name: vault.file(name) if request.param == "root file" else vault.missing(name)
        for name in PLANTED
    }
    plant(stranger, targets)
    return data, backup


def test_restore_as_root_refuses_and_writes_through_no_link(
    planted: tuple[Path, Path], stranger: Stranger, vault: Vault
) -> None:
    data, backup = planted
    done = coop("restore", str(backup), env=env(data), inherit=False)
    assert vault.changes() == []
    assert f"sudo -u {stranger.name} coop restore {backup}" in one_line(done)


def test_status_as_root_refuses_and_tightens_no_link(
    planted: tuple[Path, Path], stranger: Stranger, vault: Vault
) -> None:
    data, _ = planted
    done = coop("status", env=env(data), inherit=False)
    assert vault.changes() == []
    assert f"sudo -u {stranger.name} coop status" in one_line(done)


def test_backup_of_anothers_data_folder_as_root_refuses(
    planted: tuple[Path, Path], stranger: Stranger, vault: Vault, base: Path
) -> None:
    data, _ = planted
    done = coop("backup", str(base / "again"), env=env(data), inherit=False)
    assert vault.changes() == []
    assert not (base / "again").exists()
    assert f"sudo -u {stranger.name} coop backup {base / 'again'}" in one_line(done)


@pytest.mark.parametrize(
    "argv",
    [
        ("coop", "worker", "unlock", "--reason", "stuck"),
        ("coop", "todo", "add", "x"),
        ("coop", "cutover"),
        ("notifier", "drain"),
        ("chief", "report", "--source", "cron:builder", "done"),
    ],
    ids=" ".join,
)
def test_every_entry_point_as_root_on_anothers_folder_refuses(
    planted: tuple[Path, Path], stranger: Stranger, vault: Vault, argv: tuple[str, ...]
) -> None:
    data, _ = planted
    module = {"coop": "engine"}.get(argv[0], argv[0])
    done = run_module(module, argv[1:], env=env(data), inherit=False)
    assert vault.changes() == []
    assert f"sudo -u {stranger.name} " in one_line(done)


@pytest.fixture
def own_ledger(base: Path) -> Path:
    data = base / "data"
    data.mkdir(mode=0o700)
    assert coop("todo", "add", "kept", env=env(data), inherit=False).returncode == 0
    return data


def test_backup_into_a_folder_another_user_owns_is_refused_and_writes_nothing(
    own_ledger: Path, base: Path, stranger: Stranger
) -> None:
    theirs = base / "theirs"
    theirs.mkdir(mode=0o755)
    give(theirs, stranger)
    for target in (theirs, theirs / "deeper"):
        line = one_line(coop("backup", str(target), env=env(own_ledger), inherit=False))
        assert f"{theirs} belongs to {stranger.name}" in line
    assert list(theirs.iterdir()) == []


def test_backup_into_a_folder_others_can_write_is_refused_and_writes_nothing(
    own_ledger: Path, base: Path
) -> None:
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # a /tmp: anyone may add a name, and rename their own
    line = one_line(coop("backup", str(shared), env=env(own_ledger), inherit=False))
    assert f"{shared} has mode 1777" in line
    assert list(shared.iterdir()) == []


def test_backup_into_roots_own_folder_still_works_and_is_private(
    own_ledger: Path, base: Path
) -> None:
    done = coop("backup", str(base / "mine" / "deep"), env=env(own_ledger), inherit=False)
    assert done.returncode == 0, done.stderr
    (folder,) = (base / "mine" / "deep").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["coop.db"]
    assert {os.stat(p).st_mode & 0o777 for p in (base / "mine", folder)} == {0o700}
    assert os.stat(folder / "coop.db").st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (("coop", "status"), "coop.db-wal"),
        (("coop", "todo", "add", "x"), "coop.db-shm"),
        (("coop", "restore", "BACKUP"), "coop.db.serve.lock"),
        (("coop", "cutover"), "coop.db.notifier.lock"),
        (("notifier", "drain"), "coop.db-wal"),
        (("chief", "report", "--source", "cron:builder", "done"), "chief.db.serve.lock"),
        (("chief", "serve"), "chief.db.serve.lock"),
    ],
    ids=lambda part: " ".join(part) if isinstance(part, tuple) else part,
)
def test_a_link_in_a_folder_of_ones_own_is_refused_in_one_line_naming_it(
    base: Path, vault: Vault, argv: tuple[str, ...], name: str
) -> None:
    """Whoever runs a command on its own folder is its owner's business; a link at a name the
    product writes is still refused, in one line naming it, and not followed."""
    data, backup = _ledger_and_backup(base)
    (data / name).symlink_to(vault.file(name))
    key = write_key(base / "service.key", "links-test-key-0123456789")
    settings = env(data) | {"COOP_SERVICE_KEY_FILE": str(key), "CHIEF_OWNER": "o"}
    args = [str(backup) if word == "BACKUP" else word for word in argv[1:]]
    done = run_module({"coop": "engine"}.get(argv[0], argv[0]), args, env=settings, inherit=False)
    assert vault.changes() == []
    line = one_line(done) if done.returncode == 1 else done.stderr.strip()
    assert "Traceback" not in done.stderr
    assert f"{data / name} is a symbolic link: refused, never followed" in line, done.stderr
