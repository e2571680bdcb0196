"""Close the class: every name the product writes under a data folder it does not own, with a
link planted at that name (to a file of root's, or to a missing path) in a folder another user
owns, and the writer that writes it called as root: each one refuses the link (or replaces the
link itself, as a rename does) and no root file changes mode, owner or bytes, nothing appears
where a link points, and a refusal is one line.

This is the library under the edges (the `coop`, `chief` and `coop-notifier` commands refuse
root on such a folder before they open it: test_links_as_root.py): a host application, a test
or a future command that calls these writers directly is held by `plumbing.files` itself."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.trust.conftest import Stranger, Vault, give

Writer = Callable[[Path], object]


def _ledger(data: Path) -> object:
    from engine import store

    store.open_connection(data / "coop.db").close()
    return None


def _chief_db(data: Path) -> object:
    from chief.store import schema

    conn = schema.connect(data / "chief.db")
    try:
        schema.prepare(conn, data / "chief.db")
    finally:
        conn.close()
    return None


def _pid_lock(suffix: str) -> Writer:
    def take(data: Path) -> object:
        from notifier.pidlock import PidLock

        lock = PidLock(data / f"coop.db{suffix}", "the lock")
        try:
            return lock.try_acquire()
        finally:
            lock.release()

    return take


def _daemon_lock(data: Path) -> object:
    from engine.daemon_lock import daemon_lock_free_of_others

    with daemon_lock_free_of_others(data / "coop.db", "the sweep"):
        return None


def _door_lock(data: Path) -> object:
    from chief.serve_lock import ServeLock

    lock = ServeLock(data / "chief.db")
    try:
        return lock.try_acquire()
    finally:
        lock.release()


def _restore(data: Path) -> object:
    from engine import backup

    return backup.restore(str(data.parent / "backup"), db=str(data / "coop.db"), with_chief=True)


def _backup_into(data: Path) -> object:
    from engine import backup

    return backup.backup(str(data / "backups"), db=str(data.parent / "own" / "coop.db"))


def _drainer_log(data: Path) -> object:
    from engine import kick

    return kick.spawn_drainer(data / "coop.db")


def _cutover(data: Path) -> object:
    from engine.owner import cutover

    return cutover.cutover("http://127.0.0.1:9", actor="owner", db=data / "coop.db")


def _receipt(data: Path) -> object:
    from engine.owner import receipts

    folder = data / "receipts"
    receipts.create("k1", "done_todo", "0" * 64, str(data / "coop.db"), directory=folder)
    receipts.settle("k1", receipts.COMMITTED, directory=folder)
    return receipts.prune(directory=folder, now=10.0**10)


def _pairing(data: Path) -> object:
    from chief.telegram.pairing import Pairing, write_pairing

    pairing = Pairing(1, 1, None, None, "@bot", "now")
    return write_pairing(data / "telegram.json", pairing)


#: (a writer, the names under the data folder it writes)
WRITERS: dict[str, tuple[Writer, tuple[str, ...]]] = {
    "open the ledger": (_ledger, ("coop.db", "coop.db-wal", "coop.db-shm")),
    "open chief.db": (_chief_db, ("chief.db", "chief.db-wal", "chief.db-shm")),
    "notifier lock": (_pid_lock(".notifier.lock"), ("coop.db.notifier.lock",)),
    "serve lock": (_pid_lock(".serve.lock"), ("coop.db.serve.lock",)),
    "waiter lock": (_pid_lock(".drain-wait.lock"), ("coop.db.drain-wait.lock",)),
    "cutover's daemon lock": (_daemon_lock, ("coop.db.notifier.lock",)),
    "door lock": (_door_lock, ("chief.db.serve.lock",)),
    "restore": (
        _restore,
        (
            "coop.db",
            "coop.db-wal",
            "coop.db-shm",
            "coop.db.serve.lock",
            "coop.db.notifier.lock",
            "coop.db.drain-wait.lock",
            "chief.db",
            "chief.db-wal",
            "chief.db-shm",
            "chief.db.serve.lock",
        ),
    ),
    "backup": (_backup_into, ("backups",)),
    "drainer log": (_drainer_log, ("coop.db.drainer.log",)),
    "cutover": (_cutover, ("coop.db.owner.json", "coop.db.owner.key", "coop.db-wal")),
    "receipts": (
        _receipt,
        (
            "receipts",
            "receipts/.k1.json.new",
            "receipts/.k1.json.tmp",
            "receipts/.pruned",
        ),
    ),
    "pairing": (_pairing, ("telegram.json",)),
}
CASES = [
    (writer, name, kind)
    for writer, (_, names) in WRITERS.items()
    for name in names
    for kind in ("root file", "missing path")
]


def _prepare(base: Path, stranger: Stranger) -> Path:
    """The stranger's data folder with a ledger and chief.db in it, a backup of both beside it
    (root's), and a ledger of root's own to back up."""
    data = base / "data"
    (data / "receipts").mkdir(parents=True, mode=0o700)
    for name in ("coop.db", "chief.db"):
        with sqlite3.connect(data / name) as conn:
            conn.execute("PRAGMA journal_mode = DELETE")
    _ledger(data)
    _chief_db(data)
    backup = base / "backup"
    backup.mkdir(mode=0o700)
    for name in ("coop.db", "chief.db"):
        source = sqlite3.connect(data / name)
        with source, sqlite3.connect(backup / name) as copy:
            source.backup(copy)
        source.close()
    own = base / "own"
    own.mkdir(mode=0o700)
    _ledger(own)
    for name in os.listdir(data):
        if name.endswith(("-wal", "-shm")):
            os.unlink(data / name)
    give(data, stranger)
    return data


def _plant(data: Path, name: str, target: Path, stranger: Stranger) -> None:
    link = data / name
    if link.is_dir() and not link.is_symlink():
        link.rmdir()
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    os.chown(link, stranger.uid, stranger.gid, follow_symlinks=False)


@pytest.mark.parametrize(("writer", "name", "kind"), CASES, ids=["|".join(c) for c in CASES])
def test_no_writer_writes_through_a_link_planted_at_its_name(
    base: Path,
    stranger: Stranger,
    vault: Vault,
    monkeypatch: pytest.MonkeyPatch,
    writer: str,
    name: str,
    kind: str,
) -> None:
    data = _prepare(base, stranger)
    monkeypatch.setenv("COOP_HOME", str(data))
    monkeypatch.setenv("COOP_KICK", "off")
    for setting in ("COOP_DB", "CHIEF_DB", "COOP_OWNER_FILE"):
        monkeypatch.delenv(setting, raising=False)
    label = name.replace("/", "-")
    target = vault.file(label) if kind == "root file" else vault.missing(label)
    _plant(data, name, target, stranger)

    refused: BaseException | None = None
    try:
        WRITERS[writer][0](data)
    except Exception as exc:  # any refusal: its words are checked below
        refused = exc

    assert vault.changes() == []
    if refused is not None:
        assert "\n" not in str(refused), str(refused)
        assert "Traceback" not in str(refused)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    depth=st.integers(0, 3),
    link_at=st.integers(0, 4),
    missing=st.booleans(),
    how=st.sampled_from(["lock_file", "private_file", "tighten", "write_atomic", "private_db"]),
)
def test_plumbings_writers_never_reach_past_a_link_anywhere_on_the_path(
    base: Path, vault: Vault, depth: int, link_at: int, missing: bool, how: str
) -> None:
    """A link at any folder on the way or at the name itself, each folder one that others can
    write: the write is refused or replaces the link, and the root file is untouched. (A link
    in a folder only root can write is root's own doing, and is followed: `/var/run`.)"""
    from plumbing import files

    case = base / f"case-{depth}-{link_at}-{missing}-{how}-{os.urandom(3).hex()}"
    shared = case / "shared"
    shared.mkdir(parents=True)
    shared.chmod(0o777)  # anyone could have planted what is in it
    names = [f"d{i}" for i in range(depth)] + ["target.db"]
    link_at = min(link_at, len(names) - 1)
    where = shared
    for i, name in enumerate(names):
        if i == link_at:
            aim = vault.missing(f"{case.name}-{i}")
            if not missing:
                aim = (
                    vault.folder_of_roots(f"{case.name}-{i}")
                    if i < depth
                    else vault.file(f"{case.name}-{i}")
                )
            (where / name).symlink_to(aim)
            break
        (where / name).mkdir()
        (where / name).chmod(0o777)  # each folder on the way: others could write it too
        where = where / name
    path = shared.joinpath(*names)
    act = {
        "lock_file": lambda: os.close(files.lock_file(path)),
        "private_file": lambda: files.private_file(path),
        "tighten": lambda: files.tighten(path),
        "write_atomic": lambda: files.write_atomic(path, b"new"),
        "private_db": lambda: files.private_database(path),
    }[how]
    words = ""
    try:
        act()
    except OSError as exc:
        words = str(exc)
    assert vault.changes() == []
    assert "\n" not in words
