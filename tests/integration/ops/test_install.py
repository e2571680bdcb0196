"""`ops/install --root DIR`: the whole service install in a staging root, run twice, as the
operator runs it (a real process, real `useradd --prefix`, `pip`, `systemctl --root`).

Checked: the tree, its modes and owners (the owner and group the units name, looked up in the
staging root's own /etc/passwd and /etc/group), the settings and key never overwritten, the
installed venv whole (its `coop` runs), `systemd-analyze verify` on the installed units, a
second run that changes nothing and says so, `--uninstall` keeping the data, and the one-line
refusals. Installing the project's dependencies from the index takes about a minute here, so
the test installs the project alone (`--no-deps`): the units only need its console scripts, and
`coop --help` needs nothing but the standard library.

Needs root (it creates a user and chowns); skips in one line otherwise.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.support.install_stage import (
    INSTALL_TIMEOUT_S,
    Staged,
    copy_root,
    install,
    staged_install,
)

REPO = Path(__file__).resolve().parents[3]
UNIT_SOURCES = sorted(
    [*(REPO / "ops" / "systemd").glob("*.service"), *(REPO / "ops" / "systemd").glob("*.timer")]
)
ENABLED = {"coop-engine.service", "coop-chief-door.service"}
ANALYZE = shutil.which("systemd-analyze")
HOST_UNITS = Path("/usr/lib/systemd/system")
NOBODY = "65534"
#: A Python another user may run (the test's own may sit in root's home).
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(INSTALL_TIMEOUT_S),
    pytest.mark.skipif(os.geteuid() != 0, reason="ops/install needs root: not run here"),
]


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Staged:
    """The two runs, made once per test session and shared with every worker and with
    tests/integration/trust/test_install_links.py (tests/support/install_stage.py)."""
    return staged_install(tmp_path_factory)


def entry(root: Path, database: str, name: str) -> list[str]:
    for line in (root / "etc" / database).read_text().splitlines():
        if line.split(":")[0] == name:
            return line.split(":")
    raise AssertionError(f"no {name} in {root}/etc/{database}")


def unit_setting(unit: Path, name: str) -> list[str]:
    return re.findall(rf"(?m)^{name}=(.*)$", unit.read_text())


def mode_owner(path: Path) -> tuple[int, int, int]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid


def test_the_first_run_installs_the_tree_the_units_name(staged: Staged) -> None:
    root = staged.root
    for unit in UNIT_SOURCES:
        installed = root / "etc/systemd/system" / unit.name
        assert installed.read_text() == unit.read_text()
        assert mode_owner(installed) == (0o644, 0, 0)
        for user in unit_setting(unit, "User"):
            (group,) = unit_setting(unit, "Group")
            uid, gid = int(entry(root, "passwd", user)[2]), int(entry(root, "group", group)[2])
            for folder in " ".join(unit_setting(unit, "ReadWritePaths")).split():
                assert mode_owner(root / folder.lstrip("/")) == (0o700, uid, gid), folder
            key = root / "var/lib/coop/service.key"
            assert mode_owner(key) == (0o600, uid, gid)
            assert len(key.read_text().strip()) >= 40
    assert entry(root, "passwd", "coop")[6] == "/usr/sbin/nologin"
    env = root / "etc/coop/coop.env"
    assert env.read_text() == (REPO / "ops/coop.env.example").read_text()
    assert mode_owner(env) == (0o600, 0, 0)
    wants = {p.name for p in (root / "etc/systemd/system").glob("*.wants/*")}
    assert wants == ENABLED  # the timers are installed, not enabled
    assert "enabled coop-engine.service (not started)" in staged.first.out
    assert "next: put the bot's token in /etc/coop/coop.env" in staged.first.out
    assert "chief telegram pair" in staged.first.out
    # The staged venv's scripts run the staged Python: the tree runs where it is, not copied to
    # its final path, and the run says so rather than let it pass for an install.
    script = (root / "opt/coop/.venv/bin/coop").read_text().splitlines()[0]
    assert script == f"#!{root}/opt/coop/.venv/bin/python", script
    assert (
        f"ops/install: {root} is a staged tree for inspection: its scripts start"
        f" {root}/opt/coop/.venv/bin/python, so it runs only where it is, not copied to /;"
        " install on the target machine by running ops/install there without --root"
    ) in staged.first.out


def test_the_installed_venv_holds_the_whole_project(staged: Staged) -> None:
    venv = staged.root / "opt/coop/.venv"
    (site,) = venv.glob("lib/python3*/site-packages")
    for package in ("engine", "notifier", "chief", "plumbing"):
        modules = {p.relative_to(REPO) for p in (REPO / package).rglob("*.py")}
        assert {p.relative_to(site) for p in (site / package).rglob("*.py")} == modules
    done = subprocess.run(
        [str(venv / "bin" / "coop"), "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "backup" in done.stdout


def test_a_second_run_changes_nothing_and_says_so(staged: Staged) -> None:
    assert staged.after_second == staged.after_first
    assert staged.second.out.splitlines()[0] == (
        f"ops/install: nothing changed: the service is installed from this checkout in"
        f" {staged.root}"
    )


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed: verify not run")
def test_systemd_analyze_verifies_the_installed_units(staged: Staged, tmp_path: Path) -> None:
    copy = copy_root(staged.root, tmp_path / "root")
    # systemd's own units (the targets the ours hang on), which a staging root lacks.
    shutil.copytree(HOST_UNITS, copy / HOST_UNITS.relative_to("/"), symlinks=True)
    names = [unit.name for unit in UNIT_SOURCES]
    done = subprocess.run(
        [str(ANALYZE), "verify", "--man=no", f"--root={copy}", *names],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # ExecStart is checked inside the root: the installed console scripts are there.
    (copy / "opt/coop/.venv/bin/coop").unlink()
    broken = subprocess.run(
        [str(ANALYZE), "verify", "--man=no", f"--root={copy}", "coop-engine.service"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert "/opt/coop/.venv/bin/coop is not executable" in broken.stderr


def test_settings_and_key_are_kept_and_uninstall_keeps_the_data(
    staged: Staged, tmp_path: Path
) -> None:
    root = copy_root(staged.root, tmp_path / "root")
    env, key = root / "etc/coop/coop.env", root / "var/lib/coop/service.key"
    env.write_text(env.read_text() + "TELEGRAM_BOT_TOKEN=123:mine\n")
    (root / "var/lib/coop/coop.db").write_bytes(b"the ledger")
    kept = {path: path.read_bytes() for path in (env, key, root / "var/lib/coop/coop.db")}

    again = install("--root", str(root), "--no-deps")
    assert again.code == 0, again.err
    assert "nothing changed" in again.out

    gone = install("--root", str(root), "--uninstall")
    assert gone.code == 0, gone.err
    assert "ops/install: disabled coop-engine.service" in gone.out
    assert f"ops/install: kept {root}/var/lib/coop (the data" in gone.out
    # What to remove once the data is not wanted names the staged tree, never this machine's.
    assert (
        f"rm -r {root}/var/lib/coop {root}/var/backups/coop {root}/etc/coop;"
        f" userdel --prefix {root} coop"
    ) in gone.out, gone.out
    assert " /var/lib/coop" not in gone.out, gone.out
    assert not (root / "opt/coop").exists()
    assert not list((root / "etc/systemd/system").glob("coop-*"))
    assert not list((root / "etc/systemd/system").glob("*.wants/coop-*"))
    assert {path: path.read_bytes() for path in kept} == kept
    assert entry(root, "passwd", "coop")
    twice = install("--root", str(root), "--uninstall")
    assert twice.out.startswith("ops/install: nothing to remove"), twice.out


@pytest.mark.skipif(
    shutil.which("setpriv") is None or not Path(SYSTEM_PYTHON).exists(),
    reason=f"setpriv or {SYSTEM_PYTHON} is missing: the not-root refusal not run",
)
def test_each_expected_failure_is_one_line(tmp_path: Path) -> None:
    target = str(tmp_path / "root")
    missing = install("--root", target, "--python", str(tmp_path / "no-python"))
    assert (missing.code, missing.err.count("\n")) == (1, 1), missing
    assert "is not installed: install Python 3.11 or newer, or give --python PATH" in missing.err
    not_python = install("--root", target, "--python", "/bin/true")
    assert (not_python.code, not_python.err.count("\n")) == (1, 1), not_python
    not_root = install(
        "--root",
        target,
        "--python",
        SYSTEM_PYTHON,
        env={"PATH": "/usr/bin:/bin"},
        prefix=("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"),
    )
    assert (not_root.code, not_root.err) == (
        1,
        "ops/install: run it as root (sudo ops/install): it creates a user and writes /opt,"
        " /var/lib and /etc\n",
    )
    assert not Path(target).exists()
