"""The processes the product starts run the installed code, never a package of the same name in
the folder the caller happens to stand in.

`python -m notifier` puts the working folder first on the module path, so a `notifier/` planted
in a folder another user can write (a shared checkout, /tmp) would run in place of the drainer a
`coop notify` spawns, or of the service `coop serve` execs, with the caller's rights and
environment (its keys). Both now start Python with `-P` (3.11+), as the restore's check of a
chief.db already does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.procs import REPO, clean_env
from tests.support.waiting import wait_until_sync

PLANTED = """import os, sys
open(os.environ["PLANTED_MARK"], "a").write("planted ran: " + " ".join(sys.argv) + "\\n")
"""


def _plant(folder: Path) -> Path:
    package = folder / "notifier"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(PLANTED)
    return folder / "planted.mark"


def test_the_drainer_a_kick_spawns_is_the_installed_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    mark = _plant(cwd)
    env = clean_env(home, PLANTED_MARK=str(mark), COOP_KICK="auto")
    done = subprocess.run(
        [str(REPO / ".venv/bin/coop"), "notify", "hello", "--as", "agent"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    drainer_log = home / "coop.db.drainer.log"
    # The real drainer says something (it finds no door) within the bound; the planted one
    # would write its mark instead.
    wait_until_sync(
        lambda: mark.exists() or (drainer_log.exists() and drainer_log.stat().st_size > 0),
        timeout_s=30,
        what="the spawned drainer to run",
    )
    assert not mark.exists(), mark.read_text()


def test_coop_serve_execs_the_installed_service(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    mark = _plant(cwd)
    env = clean_env(home, PLANTED_MARK=str(mark), COOP_METRICS_PORT="off")
    service = subprocess.Popen(
        [str(REPO / ".venv/bin/coop"), "serve"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert service.stdout is not None
        first = service.stdout.readline()  # the planted one exits at once, printing nothing
        assert not mark.exists(), mark.read_text()
        # The real service spoke: its log, or its one line on a start it refuses.
        assert '"event": "service.' in first or first.startswith("coop serve: "), first
    finally:
        service.terminate()
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        if service.stdout is not None:
            service.stdout.close()
