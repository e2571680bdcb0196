"""A second local user and the links it plants: the trust boundary's tests run as root against a
data folder that user owns, in which that user pointed every name the product writes at a file
of root's (kept in a root-only vault) or at a missing path.

    stranger        a throwaway account (`useradd`, removed with `userdel -r` afterwards)
    Vault           root's files (0644, known bytes) and the missing paths links point at;
                    `vault.changes()` lists every file whose mode, owner or bytes moved, and
                    every file that appeared
    plant(...)      links made by the stranger itself (a real process under its uid)
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROCESS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Stranger:
    name: str
    uid: int
    gid: int

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """`argv` as a real process of this user's (no supplementary groups)."""
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", *argv],
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT_S,
            check=False,
        )


@dataclass
class Vault:
    """Root's files in a root-only folder: what a planted link points at."""

    folder: Path
    before: dict[str, tuple[int, int, int, bytes]] = field(default_factory=dict)

    def file(self, name: str) -> Path:
        path = self.folder / name
        if name not in self.before:
            path.write_bytes(f"root's own {name}\n".encode())
            path.chmod(0o644)
            self.before[name] = self._state(path)
        return path

    def folder_of_roots(self, name: str) -> Path:
        path = self.folder / name
        if name not in self.before:
            path.mkdir(mode=0o755)
            self.before[name] = self._state(path)
        return path

    def missing(self, name: str) -> Path:
        return self.folder / f"missing-{name}"

    @staticmethod
    def _state(path: Path) -> tuple[int, int, int, bytes]:
        info = path.lstat()
        body = b"" if stat.S_ISDIR(info.st_mode) else path.read_bytes()
        return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, body

    def changes(self) -> list[str]:
        """Every root file whose mode, owner or bytes changed, and every path that appeared."""
        found = {p.name for p in self.folder.iterdir()}
        moved = [
            f"{name}: {self.before[name][:3]} -> {self._state(self.folder / name)[:3]}"
            for name in sorted(self.before)
            if name in found and self._state(self.folder / name) != self.before[name]
        ]
        gone = [f"{name}: gone" for name in sorted(set(self.before) - found)]
        new = [f"{name}: appeared" for name in sorted(found - set(self.before))]
        return moved + gone + new


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("acting as root on another user's folder needs root: not run here")


@pytest.fixture
def stranger() -> Iterator[Stranger]:
    needs_root()
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("useradd and setpriv are needed to make and act as another user")
    name = f"coopt{os.getpid() % 100000}{os.urandom(2).hex()}"
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
        check=True,
        capture_output=True,
        timeout=PROCESS_TIMEOUT_S,
    )
    try:
        entry = pwd.getpwnam(name)
        yield Stranger(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, timeout=PROCESS_TIMEOUT_S)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder in /tmp (0755, root's) the stranger can reach: pytest's own is root-only."""
    needs_root()
    folder = Path(tempfile.mkdtemp(prefix="coop-trust-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def vault(base: Path) -> Vault:
    folder = base / "vault"
    folder.mkdir(mode=0o700)
    return Vault(folder)


def plant(stranger: Stranger, links: dict[Path, Path]) -> None:
    """Each `link -> target`, made by the stranger's own process (in its own folder)."""
    script = "import os, sys\nfor link, target in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    script += "    os.symlink(target, link)\n"
    pairs = [str(part) for link, target in links.items() for part in (link, target)]
    done = stranger.run("/usr/bin/python3", "-c", script, *pairs)
    assert done.returncode == 0, done.stderr


def give(path: Path, stranger: Stranger) -> None:
    """`path` and everything under it handed to the stranger (links themselves, not targets)."""
    for where in [path, *path.rglob("*")]:
        os.chown(where, stranger.uid, stranger.gid, follow_symlinks=False)
