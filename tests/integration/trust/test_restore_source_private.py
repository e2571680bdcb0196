"""`coop restore` takes a backup only from a folder nobody else can write.

The restore checks the backup's databases (integrity, the ledger's exact schema) and then copies
them by name: a user who could write the backup's folder could put another file in place between
the two. So the source folder must be the caller's or root's and closed to others' writes, as a
backup's target already must (`plumbing.files.check_backup_target`); then what was checked is
what is restored.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.ops.backups import run, seed, snapshot


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_backup_folder_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    root = seed(tmp_path)
    before = snapshot(root / "home")
    (root / "backup").chmod(mode)
    status, out, err = run(root / "home", "restore", str(root / "backup"))
    assert status != 0, out
    assert len(err.strip().splitlines()) == 1, err
    assert "others can write it" in err, err
    assert snapshot(root / "home") == before


def test_a_backup_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the folder to another user")
    root = seed(tmp_path)
    before = snapshot(root / "home")
    os.chown(root / "backup", 65534, 65534)  # nobody
    status, out, err = run(root / "home", "restore", str(root / "backup"))
    assert status != 0, out
    assert len(err.strip().splitlines()) == 1, err
    assert "belongs to" in err, err
    assert snapshot(root / "home") == before


def test_a_private_backup_folder_restores(tmp_path: Path) -> None:
    root = seed(tmp_path)
    (root / "backup").chmod(0o700)
    status, out, err = run(root / "home", "restore", str(root / "backup"))
    assert status == 0, err
    assert "restored" in out
