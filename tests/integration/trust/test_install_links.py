"""`ops/install --root STAGE` run again follows no link it finds: the data folder belongs to the
`coop` user, who can point the service key's name at a file of root's (or at a missing path);
and a link at the settings file or at a folder the install makes is refused the same way. Each
refusal is one line, exit 1, and no root file changes mode, owner or bytes, nothing appears
where a link points.

The first install is the session's shared staged root (tests/support/install_stage.py), copied
(`cp -a`, modes, owners and links kept): these tests plant links in it and run the install
again, never changing the code it installed, so they need no venv and wheel build of their own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.trust.conftest import Vault, needs_root
from tests.support.install_stage import INSTALL, INSTALL_TIMEOUT_S, copy_root, staged_install

pytestmark = [pytest.mark.slow, pytest.mark.timeout(INSTALL_TIMEOUT_S * 2)]


def install(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(INSTALL), "--root", str(root), "--no-deps"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs_root()
    staged = staged_install(tmp_path_factory)
    return copy_root(staged.root, tmp_path_factory.mktemp("install-links") / "root")


#: (the name in the root, what the link points at: a root file, a missing path, a root folder)
CASES = [
    ("var/lib/coop/service.key", "file"),
    ("var/lib/coop/service.key", "missing"),
    ("etc/coop/coop.env", "file"),
    ("etc/coop/coop.env", "missing"),
    ("var/lib/coop", "folder"),
    ("var/backups/coop", "folder"),
]


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{n}->{k}" for n, k in CASES])
def test_a_second_install_follows_no_link_it_finds(
    stage: Path, vault: Vault, name: str, kind: str
) -> None:
    where = stage / name
    owner = where.lstat()
    kept = where.with_name(where.name + ".kept")
    where.rename(kept)
    label = name.replace("/", "-")
    target = {
        "file": lambda: vault.file(label),
        "missing": lambda: vault.missing(label),
        "folder": lambda: vault.folder_of_roots(label),
    }[kind]()
    where.symlink_to(target)
    # Planted by the folder's owner (the staged `coop` for the data folders).
    os.chown(where, owner.st_uid, owner.st_gid, follow_symlinks=False)
    try:
        again = install(stage)
        changes = vault.changes()
    finally:
        where.unlink()
        kept.rename(where)
    assert changes == []
    assert again.returncode == 1, again.stdout
    assert again.stderr == (
        f"ops/install: /{name} is a symbolic link: refused, never followed (it may point at a"
        " file of root's); remove it, or put the real file or folder there, and run again\n"
    )


def test_the_staged_root_is_left_installed_and_a_third_run_changes_nothing(stage: Path) -> None:
    done = install(stage)
    assert done.returncode == 0, done.stderr
    assert "nothing changed" in done.stdout
