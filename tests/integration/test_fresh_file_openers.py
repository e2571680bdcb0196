"""Several processes opening one fresh database file at the same instant (the door and a cron
`chief report` on a new chief.db; two `coop` verbs on a new coop.db) all open it.

Switching a fresh file to WAL takes an exclusive lock, and SQLite answers a second connection
that asks at the same time "database is locked" at once, without its busy handler: two
connections holding SHARED and each asking for EXCLUSIVE would deadlock. Measured with four
threads released by one barrier: 78 of 300 rounds had an opener refused. Threads stand in for
processes here: each opener has its own connection, and the lock is the file's.

Private by construction: whatever the umask, an opener makes the database's folders 0700 and
the file 0600 before SQLite opens it, and SQLite gives the -wal and -shm it makes the file's own
mode. A database a looser umask made before that rule is tightened with its -wal and -shm when
it is opened; one another user owns is refused in one line."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chief.errors import ChiefStoreError
from chief.store import schema as chief_schema
from engine import store as engine_store
from engine.errors import StoreError

OPENERS = 4
ROUNDS = 40  # a refused opener in ~1 round of 4 before the fix: 40 rounds miss it ~1e-5 of runs


def _open_engine(path: Path) -> None:
    engine_store.open_connection(path).close()


def _open_chief(path: Path) -> None:
    conn = chief_schema.connect(path)
    try:
        chief_schema.prepare(conn, path)
    finally:
        conn.close()


def _race(opener: Callable[[Path], None], path: Path) -> list[Exception]:
    """`OPENERS` threads released by one barrier, each opening `path`; what they raised."""
    start = threading.Barrier(OPENERS)
    errors: list[Exception] = []

    def open_it() -> None:
        start.wait(timeout=10)
        try:
            opener(path)
        except Exception as exc:  # collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(OPENERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return errors


@pytest.mark.parametrize("opener", [_open_engine, _open_chief], ids=["coop.db", "chief.db"])
def test_openers_of_one_fresh_file_at_the_same_instant_all_open_it(
    tmp_path: Path, opener: Callable[[Path], None]
) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"round{round_}" / "fresh.db"
        path.parent.mkdir()
        errors = _race(opener, path)
        assert errors == [], f"round {round_}: {errors[0]}"
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _open_and_write(opener: Callable[[Path], sqlite3.Connection], path: Path) -> list[str]:
    """Open `path` with `opener`, write a row (so the -wal and -shm exist), and list every entry
    under the folder above it with a group or other bit while the connection is open."""
    conn = opener(path)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS probe (x)")
        conn.execute("INSERT INTO probe VALUES (1)")
        assert Path(f"{path}-wal").exists()
        assert Path(f"{path}-shm").exists()
        top = path.parent.parent
        entries = [top, *top.rglob("*")]
        return [
            f"{stat.S_IMODE(e.stat().st_mode):04o} {e}" for e in entries if e.stat().st_mode & 0o077
        ]
    finally:
        conn.close()


def _engine_conn(path: Path) -> sqlite3.Connection:
    return engine_store.open_connection(path)


def _chief_conn(path: Path) -> sqlite3.Connection:
    conn = chief_schema.connect(path)
    chief_schema.prepare(conn, path)
    return conn


CONNECTORS = {"coop.db": _engine_conn, "chief.db": _chief_conn}


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("name", CONNECTORS)
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(mask=st.integers(0, 0o077))
def test_a_fresh_database_is_private_whatever_the_umask(
    tmp_path: Path, name: str, mask: int
) -> None:
    path = tmp_path / f"umask-{mask:03o}" / "data" / name
    with _umask(mask):
        loose = _open_and_write(CONNECTORS[name], path)
    assert loose == [], f"umask {mask:03o}"


@pytest.mark.parametrize("name", CONNECTORS)
def test_a_database_a_loose_umask_made_earlier_is_tightened_with_its_wal_and_shm(
    tmp_path: Path, name: str
) -> None:
    path = tmp_path / "old" / "data" / name
    path.parent.mkdir(parents=True, mode=0o700)
    (tmp_path / "old").chmod(0o700)
    with _umask(0):
        earlier = sqlite3.connect(path)  # as an opener before the rule: 0644, -wal/-shm 0644
        earlier.execute("PRAGMA journal_mode = WAL")
        earlier.execute("CREATE TABLE kept (x)")
    try:
        os.chmod(path, 0o666)  # noqa: S103 - the loose file under test
        assert stat.S_IMODE(Path(f"{path}-wal").stat().st_mode) & 0o077

        loose = _open_and_write(CONNECTORS[name], path)
    finally:
        earlier.close()
    assert loose == []


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("another user's file needs root to make")


@contextmanager
def _acting_as(uid: int) -> Iterator[None]:
    """This process with effective user `uid` (root can switch back: its saved id stays 0)."""
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.mark.parametrize("name", CONNECTORS)
def test_a_database_root_does_not_own_is_refused_to_anyone_but_root(
    tmp_path: Path, name: str
) -> None:
    """A user handed a database another user planted in a loose folder is refused in one line;
    root, the operator acting for the service's user (`coop restore`), opens it."""
    _needs_root()
    import pwd
    import tempfile

    nobody = pwd.getpwnam("nobody").pw_uid
    folder = Path(tempfile.mkdtemp(prefix="coop-planted-"))  # /tmp: nobody can reach it
    try:
        os.chown(folder, nobody, -1)
        path = folder / name
        sqlite3.connect(path).close()  # root's: planted for nobody
        os.chmod(path, 0o666)  # noqa: S103 - the planted file under test

        with _acting_as(nobody), pytest.raises((StoreError, ChiefStoreError, OSError)) as refused:
            CONNECTORS[name](path).close()
        os.chown(path, nobody, -1)  # now the service's (nobody's) own ledger, opened by root
        CONNECTORS[name](path).close()
        mode = stat.S_IMODE(path.stat().st_mode)
    finally:
        import shutil

        shutil.rmtree(folder)
    words = str(refused.value)
    assert "belongs to uid 0" in words
    assert "chown" in words
    assert "\n" not in words
    assert mode == 0o600
