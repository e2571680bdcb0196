"""`coop request wait` beside a real `coop serve` after `coop cutover`: each look is routed to
the owner (filed as `wait_request`, like `request show`), the waiter's socket stays beside the
store on this machine, and the owner service's own post-commit wake ends the wait. A waiter
that began in local mode keeps waiting across the cutover (it holds no connection while it
waits) and is woken by the owner's close. The owner's answer from the phone (`coop serve`'s
phone route, in local mode and after a cutover) wakes it too."""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from engine import kick
from tests.e2e.owner.conftest import ServeProcess, ok, run_coop
from tests.e2e.owner.test_phone_endpoints import ask_key_of, post_answer
from tests.support.procs import PROCESS_TIMEOUT_S, child_env
from tests.support.waiting import wait_until_sync

WAIT = [sys.executable, "-m", "engine", "request", "wait"]
#: How long a waiter process may take to start and bind, on a loaded machine.
START_S = 30.0
#: Far above what a wake takes: a waiter that needs it was not woken (exit 3).
LOST_WAKE_TIMEOUT_S = "30"


def start_waiter(env: dict[str, str], request_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*WAIT, request_id, "--timeout", LOST_WAKE_TIMEOUT_S],
        env=child_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_bound(env: dict[str, str], count: int) -> None:
    folder = kick.waiters_folder(env["COOP_DB"])
    wait_until_sync(
        lambda: os.path.isdir(folder) and len(os.listdir(folder)) >= count,
        timeout_s=START_S,
        what=f"{count} waiter socket(s) in {folder}",
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def _looks(folder: Path) -> int:
    """How many `wait_request` calls the owner service's command log holds."""
    with closing(sqlite3.connect(folder / "coop.db")) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM coop_commands WHERE method = 'wait_request'"
        ).fetchone()
    return int(count)


def test_the_owner_services_close_wakes_a_routed_waiter(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path
) -> None:
    env = stack_env
    serve.start()
    ok(env, "request", "add", "before the cutover")
    early = start_waiter(env, "1")  # local mode: its first look reads the file itself
    try:
        wait_bound(env, 1)
        assert "installed the fence" in ok(env, "cutover")
        ok(env, "request", "add", "after the cutover", "--to", "owner")
        routed = start_waiter(env, "2")
        try:
            wait_bound(env, 2)
            # Its socket is bound before its first look: wait for that look to reach the owner's
            # command log too, or a close landing between the two is seen by the first look
            # (one look, not two: seen once under load).
            wait_until_sync(
                lambda: _looks(tmp_path) >= 1, timeout_s=30, what="#2's first routed look"
            )
            ok(env, "request", "close", "2", "--summary", "approve", "--as", "owner")
            assert finish(routed) == (0, "request #2 closed by owner: approve\n", "")
        finally:
            finish(routed)
        assert early.poll() is None  # #2's close woke nobody waiting for #1
        ok(env, "request", "close", "1", "--summary", "done")
        assert finish(early) == (0, "request #1 closed by agent: done\n", "")
    finally:
        finish(early)

    settled = run_coop(env, "request", "wait", "1", "--timeout", "0")
    assert (settled.returncode, settled.stderr) == (0, "")  # closed: answered at once
    refused = run_coop(env, "request", "wait", "9", "--timeout", "1")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "coop: request #9 does not exist — `coop list --all` shows the ids\n"
    assert not os.path.exists(kick.waiters_folder(env["COOP_DB"]))
    with closing(sqlite3.connect(tmp_path / "coop.db")) as conn:
        methods = [row[0] for row in conn.execute("SELECT method FROM coop_commands")]
    # The routed looks ran at the owner: #2's first look and the one after its wake, #1's look
    # after its wake, and the two single looks above.
    assert methods.count("wait_request") >= 5


@pytest.mark.parametrize("mode", ["local", "service"])
def test_the_owners_answer_from_the_phone_wakes_the_waiter(
    serve: ServeProcess, stack_env: dict[str, str], tmp_path: Path, mode: str
) -> None:
    """The phone's route on `coop serve` closes the request (local mode: on a connection of its
    own; after a cutover: on the owner's) and wakes its waiter, like any other close."""
    env = stack_env
    serve.start()
    if mode == "service":
        ok(env, "cutover")
    ok(env, "request", "add", "order the bigger bag?", "--to", "owner", "--choices", "yes,no")
    # Held after its first look found #1 open: only the answer's wake can end this wait.
    hold = tmp_path / "hold"
    hold.touch()
    waiter = start_waiter(
        {**env, "COOP_TEST_FAULTS": f"engine.wait.looked:pause-while={hold}"}, "1"
    )
    try:
        wait_until_sync(
            lambda: Path(f"{hold}.reached").exists(),
            timeout_s=START_S,
            what="the waiter's first look",
        )
        body = {
            "answer_key": "a-" + secrets.token_hex(16),
            "request_id": 1,
            "ask_key": ask_key_of(env, 1),
            "choice": "yes",
        }
        answered = post_answer(serve, env, body)
        assert answered.status_code == 200, answered.text
        assert answered.json()["outcome"] == "closed"
        hold.unlink()
        assert finish(waiter) == (0, "request #1 closed by owner: yes\n", "")
    finally:
        finish(waiter)
