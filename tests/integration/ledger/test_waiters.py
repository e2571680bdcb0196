"""The waiters of `coop request wait` on real Unix sockets (`engine.kick`): where the folder is,
what a waiter leaves behind, which waiters a wake reaches, and which answers count as settled.
The processes are in tests/e2e/ledger/test_request_wait.py."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import kick
from engine.verbs.ledger import _waited, wait_timeout


@pytest.fixture
def short_db() -> Iterator[str]:
    """A store whose waiters' folder fits beside it (pytest's own folders are too deep)."""
    folder = tempfile.mkdtemp(prefix="w", dir="/tmp")
    try:
        yield os.path.join(folder, "coop.db")
    finally:
        shutil.rmtree(folder)


def test_the_folder_is_beside_the_store_or_in_tmp_by_a_stable_name(short_db: str) -> None:
    assert kick.waiters_folder(short_db) == os.path.realpath(short_db) + ".waiters"
    deep = "/tmp/" + "d" * 80 + "/coop.db"
    far = kick.waiters_folder(deep)
    assert far.startswith("/tmp/coop-waiters-")
    assert far == kick.waiters_folder(deep)
    assert far != kick.waiters_folder(deep.replace("coop.db", "other.db"))


def test_a_waiter_binds_in_a_private_folder_and_leaves_nothing(short_db: str) -> None:
    folder = kick.waiters_folder(short_db)
    with kick.Waiter(short_db, 7) as waiter:
        assert waiter.path is not None
        assert os.path.dirname(waiter.path) == folder
        assert os.path.basename(waiter.path).startswith(f"7.{os.getpid()}.")
        assert stat.S_ISSOCK(os.stat(waiter.path).st_mode)
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert not os.path.exists(folder)
    with pytest.raises(RuntimeError), kick.Waiter(short_db, 7):
        raise RuntimeError("the caller failed")
    assert not os.path.exists(folder)


def test_the_last_waiter_out_removes_the_folder_and_not_before(short_db: str) -> None:
    folder = kick.waiters_folder(short_db)
    with kick.Waiter(short_db, 1) as first:
        with kick.Waiter(short_db, 1):
            assert len(os.listdir(folder)) == 2
        assert os.listdir(folder) == [os.path.basename(str(first.path))]
    assert not os.path.exists(folder)


def test_a_wake_reaches_the_waiters_of_its_request_only(short_db: str) -> None:
    assert kick.wake_waiters(short_db, 1) == 0  # nobody waits: no folder at all
    with kick.Waiter(short_db, 1) as one, kick.Waiter(short_db, 12) as twelve:
        assert kick.wake_waiters(short_db, 2) == 0
        assert kick.wake_waiters(short_db, 1) == 1  # "12." is not "1."
        assert one.wait(5.0) is True
        assert twelve.wait(0.0) is False
        for _ in range(3):
            kick.wake_waiters(short_db, 12)
        assert twelve.wait(5.0) is True  # all three read at once
        assert twelve.wait(0.0) is False
        assert kick.wake_waiters(short_db) == 2  # None: every waiter


def test_a_dead_waiters_socket_is_removed_by_the_wake_that_finds_it(short_db: str) -> None:
    folder = kick.waiters_folder(short_db)
    os.mkdir(folder, 0o700)
    dead = os.path.join(folder, "3.999999.deadbeef")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(dead)  # closed without unlinking: as after a SIGKILL
    with kick.Waiter(short_db, 3) as alive:
        assert kick.wake_waiters(short_db, 3) == 1
        assert os.listdir(folder) == [os.path.basename(str(alive.path))]


def test_a_folder_not_of_this_users_is_refused(short_db: str) -> None:
    folder = kick.waiters_folder(short_db)
    Path(folder).write_text("not a folder")
    with pytest.raises(PermissionError, match="not a folder of this user's"):
        kick.Waiter(short_db, 1).__enter__()
    os.unlink(folder)
    if os.geteuid() == 0:
        os.mkdir(folder, 0o700)
        os.chown(folder, 65534, 65534)
        with pytest.raises(PermissionError, match="not a folder of this user's"):
            kick.Waiter(short_db, 1).__enter__()


def test_an_open_folder_of_this_users_is_made_private(short_db: str) -> None:
    folder = kick.waiters_folder(short_db)
    os.mkdir(folder)
    os.chmod(folder, 0o777)  # noqa: S103 - the state being corrected
    with kick.Waiter(short_db, 1):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


@pytest.mark.parametrize(
    ("answer", "settled"),
    [
        ({"request": {"id": 4, "status": "closed"}}, 4),
        ({"request": {"id": 4, "status": "abandoned"}}, 4),
        ({"request": {"id": 4, "status": "taken"}}, None),
        ({"request": {"id": 4, "status": "open"}, "outbox_id": 9}, None),
        ({"todo": {"id": 4, "status": "done"}}, None),
        ({"outcome": "closed", "request": {"id": 5, "status": "closed"}}, 5),  # the phone's
        ({"outcome": "unknown_request", "request": None}, None),
        ([{"id": 4, "status": "closed"}], None),
        (None, None),
    ],
)
def test_which_answers_settle_a_request(answer: object, settled: int | None) -> None:
    assert kick.settled_request(answer) == settled


def test_after_commit_kicks_only_for_an_outbox_row_and_wakes_only_a_settled_request(
    short_db: str,
) -> None:
    closed = {"request": {"id": 2, "status": "closed"}, "outbox_id": 8}
    with kick.Waiter(short_db, 2) as waiter:
        assert kick.after_commit(short_db, {"request": {"id": 2, "status": "open"}}, "off") == (
            "none"
        )
        assert waiter.wait(0.0) is False
        assert kick.after_commit(short_db, closed, "off") == "off"
        assert waiter.wait(5.0) is True


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.5, "5", True])
def test_a_timeout_that_is_no_duration_is_refused(bad: object) -> None:
    from engine.errors import UsageError

    with pytest.raises(UsageError):
        wait_timeout(bad)  # type: ignore[arg-type]


def test_the_line_says_who_settled_it_and_how() -> None:
    row = {"status": "abandoned", "closed_by": "agent", "reason": "no longer needed"}
    assert _waited({"request": row}, {}) == "abandoned by agent: no longer needed"
    closed = {"status": "closed", "closed_by": "owner", "result_summary": None, "commit_sha": None}
    assert _waited({"request": closed}, {}) == "closed by owner"
    assert wait_timeout(None) is None
    assert wait_timeout(0) == 0.0
