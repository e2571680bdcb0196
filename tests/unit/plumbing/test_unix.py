"""plumbing.unix on real sockets: a private socket binds 0600, a client's check refuses what
another user could have made, the kernel names the peer, a live socket is never taken over."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from plumbing import unix


def test_a_bound_socket_is_private_and_passes_the_clients_check(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    path = str(tmp_path / "door.sock")
    server = unix.bind_private(path)
    try:
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        unix.check_private(path)
        client = unix.connect_checked(path, timeout=5)
        conn, _ = server.accept()
        assert unix.peer_uid(conn) == os.geteuid()
        client.close()
        conn.close()
    finally:
        server.close()


def test_a_folder_others_can_write_is_refused_both_ways(tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    path = str(tmp_path / "door.sock")
    with pytest.raises(PermissionError, match="no one else can write"):
        unix.bind_private(path)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.bind(path)
    try:
        with pytest.raises(PermissionError, match="nothing was sent"):
            unix.check_private(path)
    finally:
        raw.close()


def test_a_socket_of_another_uid_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    path = str(tmp_path / "door.sock")
    server = unix.bind_private(path)
    try:
        with pytest.raises(PermissionError, match="belongs to uid"):
            unix.check_private(path, uid=os.geteuid() + 12345)
    finally:
        server.close()


def test_what_is_not_a_socket_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    path = tmp_path / "door.sock"
    path.symlink_to("/etc/passwd")
    with pytest.raises(PermissionError, match="not a socket"):
        unix.check_private(str(path))
    with pytest.raises(FileExistsError):
        unix.bind_private(str(path))
    assert path.is_symlink()


def test_nothing_there_says_so(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing listens"):
        unix.check_private(str(tmp_path / "door.sock"))


def test_a_stale_socket_is_replaced_and_a_live_one_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    path = str(tmp_path / "door.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays; nobody holds it
    live = unix.bind_private(path)
    try:
        with pytest.raises(OSError, match="already answers") as caught:
            unix.bind_private(path)
        assert caught.value.errno == errno.EADDRINUSE
    finally:
        live.close()


def test_a_path_longer_than_an_address_holds_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="longer than"):
        unix.bind_private(str(tmp_path / ("x" * 120)))


def _filled(path: str) -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket whose queue of connections not yet accepted is full (backlog 0 holds
    one), and the connections that fill it."""
    server = unix.bind_private(path, backlog=0)
    queued = []
    while True:
        waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        waiting.setblocking(False)
        try:
            waiting.connect(path)
        except BlockingIOError:
            waiting.close()
            return server, queued
        queued.append(waiting)


def test_a_client_waits_for_a_place_in_a_full_queue(tmp_path: Path) -> None:
    """A flood of connections fills the service's accept queue: a client's connect waits its
    turn, as a TCP client's does, rather than failing at once with EAGAIN ("Resource
    temporarily unavailable", which failed `coop list` beside a flood)."""
    tmp_path.chmod(0o700)
    path = str(tmp_path / "service.sock")
    server, queued = _filled(path)
    accepted: list[socket.socket] = []
    try:
        # The service takes one connection off the queue a moment later: a place frees.
        timer = threading.Timer(0.3, lambda: accepted.append(server.accept()[0]))
        timer.start()
        client = unix.connect_checked(path, timeout=10)
        timer.join()
        client.close()
    finally:
        for each in queued + accepted:
            each.close()
        server.close()


def test_a_queue_that_stays_full_times_out_in_one_line(tmp_path: Path) -> None:
    tmp_path.chmod(0o700)
    path = str(tmp_path / "service.sock")
    server, queued = _filled(path)
    try:
        began = time.monotonic()
        with pytest.raises(TimeoutError, match=r"took no new connection within 0\.3 s"):
            unix.connect_checked(path, timeout=0.3)
        assert time.monotonic() - began < 5
    finally:
        for each in queued:
            each.close()
        server.close()
