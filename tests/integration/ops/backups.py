"""What the restore tests share: a data folder with both databases and one `coop backup` of it,
the `coop` CLI run on it, and a folder's files by name with their bytes."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.support.procs import clean_env, coop, run_module


def run(home: Path, *args: str) -> tuple[int, str, str]:
    """`coop ARGS` on the data folder `home`: its exit status, stdout and stderr."""
    done = coop(*args, env=clean_env(home, COOP_KICK="off", COOP_ACTOR="builder"), inherit=False)
    return done.returncode, done.stdout, done.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a folder, by name, with its bytes."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def sql(db: Path, *statements: str) -> None:
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        for statement in statements:
            conn.execute(statement)


def seed(root: Path) -> Path:
    """`root` with a data folder (`home`: two todos, a queued notification, a Chief line) and
    one backup of it (`backup`)."""
    home = root / "home"
    home.mkdir(mode=0o700)
    for argv in (("todo", "add", "one"), ("todo", "add", "two"), ("notify", "hello")):
        assert run(home, *argv)[0] == 0
    landed = run_module(
        "chief",
        ["report", "--source", "cron:backup", "--fire", "1", "a cron line"],
        env=clean_env(home, CHIEF_OWNER="owner"),
        inherit=False,
    )
    assert landed.returncode == 0, landed.stderr
    status, _, err = run(home, "backup", str(root / "backups"))
    assert status == 0, err
    (folder,) = (root / "backups").iterdir()
    shutil.move(folder, root / "backup")
    shutil.rmtree(root / "backups")
    return root
