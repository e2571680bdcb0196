"""One `ops/install --root DIR --no-deps` staging root for the whole test session.

A staged install is a venv and a wheel build (about 10 s of CPU, half a minute on a loaded
machine), and no test changes the code it installs: tests/integration/ops/test_install.py reads
the root the two runs made (or a copy of it) and tests/integration/trust/test_install_links.py
plants its links in a copy. So it is made once: the first test (on any xdist worker) to ask makes
it under a lock in the session's shared temporary folder; every later one reads what it wrote.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "ops" / "install"
INSTALL_TIMEOUT_S = 300


@dataclass
class Run:
    code: int
    out: str
    err: str


def install(*args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()) -> Run:
    done = subprocess.run(
        [*prefix, str(INSTALL), *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
        env=env,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under `root`: its type, mode, owner, group, and its bytes' digest or link."""
    found: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            body: object = os.readlink(path)
        elif stat.S_ISREG(info.st_mode):
            body = (hashlib.sha256(path.read_bytes()).hexdigest(), info.st_mtime_ns)
        else:
            body = None
        found[str(path.relative_to(root))] = (
            stat.S_IFMT(info.st_mode), stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid, body
        )  # fmt: skip
    return found


@dataclass
class Staged:
    """The staging root after two runs, what each said, and its tree after each."""

    root: Path
    first: Run
    second: Run
    after_first: dict[str, tuple[object, ...]]
    after_second: dict[str, tuple[object, ...]]


def _stage(root: Path) -> Staged:
    first = install("--root", str(root), "--no-deps")
    assert first.code == 0, first.err
    after_first = tree(root)
    second = install("--root", str(root), "--no-deps")
    assert second.code == 0, second.err
    return Staged(root, first, second, after_first, tree(root))


def staged_install(tmp_path_factory: pytest.TempPathFactory) -> Staged:
    """The session's staged root: read it only, or copy it (`copy_root`) to change it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "ops-install-staged"
    folder.mkdir(exist_ok=True)
    with (folder / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = folder / "staged.pickle"
        if made.exists():
            found: Staged = pickle.loads(made.read_bytes())  # noqa: S301 (this session wrote it)
            return found
        result = _stage(folder / "root")
        made.write_bytes(pickle.dumps(result))
        return result


def copy_root(root: Path, copy: Path) -> Path:
    """A copy of a staged root, modes, owners and links kept (`cp -a`)."""
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True, timeout=INSTALL_TIMEOUT_S)
    return copy
