"""Who delivers across a cutover, in process: the cutover's look at the ledger's daemon lock
(`engine.daemon_lock`), which connections the fence refuses (`engine.store.fence_refuses`), and
the line `coop status --check` gives when the owner service's daemon does not deliver
(`engine.status.delivery_problems`), for every answer the owner's `/status` may give."""

from __future__ import annotations

import fcntl
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import owner, status, store
from engine.daemon_lock import daemon_lock_file, daemon_lock_free_of_others, serve_lock_file
from engine.errors import UsageError
from engine.owner import cutover


@contextmanager
def held(path: str, pid: str) -> Iterator[None]:
    """`path` flocked by another open file (as another process holds it), `pid` written."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, pid.encode())
        yield
    finally:
        os.close(fd)


def is_free(path: str) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_free_lock_is_held_by_the_cutover_until_it_is_done(home: Path) -> None:
    db = home / "coop.db"
    with daemon_lock_free_of_others(db, "the cutover"):
        assert not is_free(daemon_lock_file(db))  # no daemon takes the ledger meanwhile
    assert is_free(daemon_lock_file(db))


def test_coop_serves_own_daemon_lets_the_cutover_through(home: Path) -> None:
    db = home / "coop.db"
    Path(serve_lock_file(db)).write_text("4242\n")
    with held(daemon_lock_file(db), "4242\n"), daemon_lock_free_of_others(db, "the cutover"):
        pass


@pytest.mark.parametrize(("pid", "serve_pid"), [("4242\n", "17\n"), ("4242\n", None), ("", "")])
def test_any_other_holder_is_refused_in_one_line_naming_it(
    home: Path, pid: str, serve_pid: str | None
) -> None:
    db = home / "coop.db"
    if serve_pid is not None:
        Path(serve_lock_file(db)).write_text(serve_pid)
    with (
        held(daemon_lock_file(db), pid),
        pytest.raises(UsageError) as refused,
        daemon_lock_free_of_others(db, "the cutover"),
    ):
        pytest.fail("ran beside a standalone daemon")

    line = refused.value.message
    assert "\n" not in line
    assert ("pid 4242" in line and "`kill 4242`" in line) if pid else "pid unknown" in line
    assert "the cutover would fence it out" in line


def test_a_refused_cutover_changes_nothing(home: Path) -> None:
    db = home / "coop.db"
    store.open_connection(db).close()
    with held(daemon_lock_file(db), "4242\n"), pytest.raises(UsageError):
        cutover.cutover(str(home / "service.sock"), actor="operator", db=db)

    assert sorted(path.name for path in home.iterdir()) == ["coop.db", "coop.db.notifier.lock"]
    with closing(sqlite3.connect(db)) as conn:
        assert store.fence_triggers(conn) == []


def test_only_a_connection_without_the_owners_function_is_refused_by_the_fence(
    home: Path,
) -> None:
    db = home / "coop.db"
    with closing(store.open_connection(db)) as plain:
        assert not store.fence_refuses(plain)  # local mode: no fence at all
        with store.write(plain):
            store.install_fence(plain)
    with closing(store.open_connection(db)) as plain:
        assert store.fence_refuses(plain)
    with closing(owner.register_fence_function(store.open_connection(db))) as owners:
        assert not store.fence_refuses(owners)


def report(service: object, oldest: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"owner_service": service, "oldest_pending": oldest}


def test_a_row_behind_a_refused_writer_is_one_line_naming_it_and_what_to_do() -> None:
    service = {"answered": True, "mode": "service", "daemon": False, "daemon_lock_holder": 4242}

    [line] = status.delivery_problems(report(service, {"id": 7, "age_s": 1.0}))

    assert line.startswith("outbox row #7 is pending: ")
    assert "pid 4242" in line
    assert "`kill 4242`" in line


@pytest.mark.parametrize(
    "service",
    [
        None,  # local mode
        {"answered": False, "socket": "/s", "error": "refused"},
        {"answered": True, "mode": "service", "daemon": True, "daemon_lock_holder": None},
    ],
)
def test_nothing_is_said_when_the_owner_delivers_or_is_not_asked(service: object) -> None:
    assert status.delivery_problems(report(service, {"id": 1, "age_s": 1.0})) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(
    answer=st.fixed_dictionaries(
        {
            "answered": st.just(True) | st.booleans(),
            "daemon": st.just(False) | JSON,
            "daemon_lock_holder": st.text(max_size=4) | st.integers() | JSON,
        },
        optional={"mode": JSON, "socket": JSON},
    )
    | JSON,
    oldest=st.none() | st.fixed_dictionaries({"id": st.integers(1, 10**6), "age_s": st.floats()}),
)
def test_any_owner_answer_gives_at_most_one_plain_line(answer: object, oldest: Any) -> None:
    found = status.delivery_problems(report(answer, oldest))

    assert len(found) <= 1
    for line in found:
        assert line.isprintable(), line
