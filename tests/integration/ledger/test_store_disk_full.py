"""A write that meets a full disk: SQLite has already rolled the transaction back by the time the
error reaches Python, so the store must not roll back again, and callers see `StoreError`.

The disk is filled for real, with SQLite's own page limit (`PRAGMA max_page_count`): the write
fails inside SQLite with SQLITE_FULL ("database or disk is full") exactly as on ENOSPC, and SQLite
ends the transaction itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import ledger, owner, store
from engine.errors import StoreError
from engine.owner import commands


def _fill(conn: sqlite3.Connection) -> None:
    """Allow the file no page beyond the ones it has: the next growth is SQLITE_FULL."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")


def _big_write(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO todos (title, created_by, created_at, updated_at)"
        " VALUES (hex(randomblob(200000)), 'builder', 'x', 'x')"
    )


def _todo_count(db: Path) -> int:
    with sqlite3.connect(db) as raw:
        return int(raw.execute("SELECT COUNT(*) FROM todos").fetchone()[0])


def test_a_write_on_a_full_disk_raises_store_error_and_leaves_the_connection_usable(
    tmp_path: Path,
) -> None:
    db = tmp_path / "coop.db"
    conn = store.open_connection(db)
    try:
        _fill(conn)
        with pytest.raises(StoreError, match="database or disk is full"), store.write(conn):
            _big_write(conn)
        assert not conn.in_transaction
        with store.write(conn):  # a small write still fits: the connection is not wedged
            conn.execute("UPDATE worker_lock SET owner = owner")
    finally:
        conn.close()
    assert _todo_count(db) == 0


def test_a_verb_in_a_savepoint_on_a_full_disk_raises_store_error(tmp_path: Path) -> None:
    db = tmp_path / "coop.db"
    conn = store.open_connection(db)
    try:
        _fill(conn)
        # The owner's shape: the verb's write is a savepoint of the filing's transaction.
        outer, inner = store.write(conn), store.write(conn)
        with pytest.raises(StoreError, match="database or disk is full"), outer, inner:
            _big_write(conn)
        assert not conn.in_transaction
    finally:
        conn.close()
    assert _todo_count(db) == 0


def test_the_owner_files_nothing_when_the_disk_is_full_and_reports_a_store_error(
    tmp_path: Path,
) -> None:
    db = tmp_path / "coop.db"
    conn = owner.register_fence_function(store.open_connection(db))
    try:
        _fill(conn)
        with pytest.raises(StoreError, match="database or disk is full"):
            commands.run(
                conn,
                key="k" * 16,
                method="add_todo",
                args=["a todo too big for the disk"],
                kwargs={"actor": "builder", "body": "x" * 400_000},
                digest="d",
                metadata={},
            )
        assert not conn.in_transaction
        # Nothing was filed: `coop reconcile` will truthfully answer that it never arrived.
        assert commands.lookup(conn, "k" * 16) is None
    finally:
        conn.close()
    assert _todo_count(db) == 0
    assert ledger.list_items(None, include_closed=True, db=str(db)) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB file system (tmpfs), where this process may mount one; skipped elsewhere."""
    mount = shutil.which("mount")
    umount = shutil.which("umount")
    point = tmp_path / "small-disk"
    point.mkdir()
    if mount is None or umount is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount(8); SQLite's page limit covers it")
    mounted = subprocess.run(
        [mount, "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace')}")
    try:
        yield point
    finally:
        if subprocess.run([umount, str(point)], check=False).returncode != 0:
            subprocess.run([umount, "-l", str(point)], check=True)  # never leave it mounted


def test_a_write_on_a_really_full_disk_is_a_store_error_and_the_ledger_recovers(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    db = small_disk / "coop.db"
    ledger.add_todo("before the disk filled", actor="builder", db=str(db))
    conn = store.open_connection(db)  # open before the disk fills, as a running service is
    try:
        filler = small_disk / "filler"
        with filler.open("wb") as handle, contextlib.suppress(OSError):
            while True:  # bounded by the file system's 2 MB
                handle.write(b"\0" * 65536)
                handle.flush()

        with pytest.raises(StoreError, match="database or disk is full"), store.write(conn):
            _big_write(conn)
        assert not conn.in_transaction

        filler.unlink()
        with store.write(conn):  # the same connection writes again once there is room
            conn.execute(
                "INSERT INTO todos (title, created_by, created_at, updated_at)"
                " VALUES ('after the disk emptied', 'builder', 'x', 'x')"
            )
    finally:
        conn.close()
    titles = [item["title"] for item in ledger.list_items(None, db=str(db))]
    assert titles == ["before the disk filled", "after the disk emptied"]
    raw = sqlite3.connect(db)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        raw.close()
