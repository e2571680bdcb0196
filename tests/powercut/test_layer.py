"""The power-cut layer's own promises: what a cut drops, what it keeps, and that SQLite comes
back whole from what it leaves (tests.support.powercut_fs)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.support.powercut import Layer

FULL_ROWS = 40
UNSYNCED_TRANSACTIONS = 6
BLOB_BYTES = 3 * 4096  # a transaction of several pages: its last write is a whole page


def write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_file(layer: Layer, name: str, data: bytes) -> Path:
    """A file written, fsynced, and its name made durable: what survives any cut."""
    path = layer.path / name
    write_file(path, data, sync=True)
    sync_dir(layer.path)
    return path


def test_a_write_without_fsync_is_gone_after_a_cut(layer: Layer) -> None:
    kept = durable_file(layer, "kept.txt", b"before")
    write_file(kept, b"after, never synced", sync=False)
    write_file(layer.path / "new.txt", b"never synced", sync=False)
    sync_dir(layer.path)  # the new name is durable; its data is not
    assert kept.read_bytes() == b"after, never synced"  # readers see held writes at once
    assert layer.stats()["held_writes"] >= 3

    figures = layer.cut(seed=1)
    layer.mount()

    assert figures["kept_writes"] == 0
    assert kept.read_bytes() == b"before"
    assert (layer.path / "new.txt").read_bytes() == b""


def test_a_write_with_fsync_survives(layer: Layer) -> None:
    path = durable_file(layer, "receipt.json", b'{"state": "uncertain"}')
    write_file(path, b'{"state": "committed"}', sync=True)

    layer.cut(seed=2)
    layer.mount()

    assert path.read_bytes() == b'{"state": "committed"}'


def test_a_new_file_without_a_directory_fsync_may_vanish(layer: Layer) -> None:
    write_file(layer.path / "orphan.txt", b"synced data, unsynced name", sync=True)

    figures = layer.cut(seed=3)
    layer.mount()

    assert figures["names_undone"] == 1
    assert not (layer.path / "orphan.txt").exists()


def test_a_new_folder_needs_its_parent_synced_as_well_as_itself(layer: Layer) -> None:
    """A folder's own fsync commits the names in it, not its own name in its parent."""
    folder = layer.path / "receipts"
    folder.mkdir()
    write_file(folder / "r.json", b"uncertain", sync=True)
    sync_dir(folder)

    figures = layer.cut(seed=7)
    layer.mount()

    assert figures["names_undone"] == 1
    assert not folder.exists()


@pytest.mark.parametrize(("keep", "undone"), [(0.0, True), (1.0, False)])
def test_a_rename_without_a_directory_fsync_may_be_undone(
    layer: Layer, keep: float, undone: bool
) -> None:
    target = durable_file(layer, "state.json", b"old")
    staged = durable_file(layer, "state.json.tmp", b"new")
    staged.rename(target)  # the atomic replace, without the directory's fsync
    assert target.read_bytes() == b"new"

    layer.cut(seed=4, keep=keep)
    layer.mount()

    assert target.read_bytes() == (b"old" if undone else b"new")
    assert staged.exists() == undone


def test_a_rename_with_a_directory_fsync_survives(layer: Layer) -> None:
    target = durable_file(layer, "state.json", b"old")
    staged = durable_file(layer, "state.json.tmp", b"new")
    staged.rename(target)
    sync_dir(layer.path)

    layer.cut(seed=5)
    layer.mount()

    assert target.read_bytes() == b"new"
    assert not staged.exists()


def open_db(path: Path, synchronous: str) -> sqlite3.Connection:
    # EXCLUSIVE keeps the WAL index in memory, not in a mapped -shm file, so the last write
    # before the cut is the WAL's own (the kernel writes a mapped file back when it likes).
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def fill(conn: sqlite3.Connection, first: int, count: int, blob: bytes = b"") -> None:
    for n in range(first, first + count):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (n, blob) VALUES (?, ?)", (n, blob))
        conn.execute("COMMIT")


def test_a_torn_write_is_detected_by_sqlite_and_recovered(layer: Layer) -> None:
    """The last WAL write (the commit frame of a transaction never synced) reaches the disk in
    part: SQLite's frame checksum rejects it, and the database comes back at the transaction
    before it, every committed row intact."""
    db = layer.path / "torn.db"
    conn = open_db(db, "FULL")
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, blob BLOB)")
    fill(conn, 0, FULL_ROWS)
    conn.execute("PRAGMA synchronous=OFF")
    fill(conn, FULL_ROWS, UNSYNCED_TRANSACTIONS, blob=os.urandom(BLOB_BYTES))

    figures = layer.cut(seed=6, keep=1.0, tear=True)
    conn.close()  # its file handles are gone with the mount
    layer.mount()

    torn = figures["torn"]
    assert torn is not None, figures
    assert 0 < torn["bytes_kept"] < torn["of"], figures
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = [n for (n,) in conn.execute("SELECT n FROM t ORDER BY n")]
    # Every write but the torn one reached the disk: every transaction but the last survived.
    assert rows == list(range(FULL_ROWS + UNSYNCED_TRANSACTIONS - 1))


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_sqlite_keeps_every_synced_commit_under_a_seeded_subset(layer: Layer, seed: int) -> None:
    """Half the held writes reach the disk, in any order, the last one torn: SQLite still
    opens whole, with every FULL commit and a prefix of the rest."""
    db = layer.path / "subset.db"
    conn = open_db(db, "FULL")
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, blob BLOB)")
    fill(conn, 0, FULL_ROWS)
    conn.execute("PRAGMA synchronous=NORMAL")
    fill(conn, FULL_ROWS, UNSYNCED_TRANSACTIONS, blob=os.urandom(BLOB_BYTES))

    layer.cut(seed=seed, keep=0.5, tear=True)
    conn.close()
    layer.mount()

    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = [n for (n,) in conn.execute("SELECT n FROM t ORDER BY n")]
    assert rows == list(range(len(rows)))
    assert len(rows) >= FULL_ROWS
