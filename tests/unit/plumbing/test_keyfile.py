"""The floor's one key reader (`plumbing.keyfile`): the service key the notifier, `coop status`,
the engine service and the door read, and the owner credential. Each package's edge words its
refusal (engine.keyfile, notifier.config, chief.door.config); the rule is here, once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumbing import files
from plumbing.keyfile import MAX_KEY_FILE_BYTES, read_key, service_key_file

WHAT = "COOP_SERVICE_KEY_FILE"


def key_file(tmp_path: Path, content: str | bytes, mode: int = 0o600) -> Path:
    path = tmp_path / "service.key"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(
    ("mode", "content", "key"),
    [(0o600, "k\n", "k"), (0o400, " k ", "k"), (0o600, "k" * 4096, "k" * 4096)],
)
def test_a_private_key_file_is_read_stripped(
    tmp_path: Path, mode: int, content: str, key: str
) -> None:
    assert read_key(key_file(tmp_path, content, mode), WHAT) == key


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660, 0o606])
def test_a_key_file_others_could_read_or_write_is_refused_saying_the_chmod(
    tmp_path: Path, mode: int
) -> None:
    path = key_file(tmp_path, "k\n", mode)
    with pytest.raises(files.NotPrivate) as refused:
        read_key(path, WHAT)
    assert str(refused.value) == (
        f"{WHAT} {path} has mode {mode:04o}; it must be private (0600): run `chmod 600 {path}`"
    )


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", "is empty"),
        ("  \n", "is empty"),
        ("k" * (MAX_KEY_FILE_BYTES + 1), f"is larger than a key ({MAX_KEY_FILE_BYTES} bytes)"),
        (b"\xff\xfe", "is not UTF-8 text"),
    ],
)
def test_a_file_that_holds_no_key_is_refused_in_one_line(
    tmp_path: Path, content: str | bytes, line: str
) -> None:
    path = key_file(tmp_path, content)
    with pytest.raises(ValueError, match=f"^{WHAT} ") as refused:
        read_key(path, WHAT)
    assert str(refused.value) == f"{WHAT} {path} {line}"


def test_a_missing_key_file_is_file_not_found_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "absent.key"
    with pytest.raises(FileNotFoundError) as refused:
        read_key(path, WHAT)
    assert str(refused.value) == f"{WHAT} {path} cannot be read (No such file or directory)"


def test_a_folder_and_a_fifo_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    for path in (tmp_path, fifo):
        with pytest.raises(OSError, match="is not a regular file") as refused:
            read_key(path, WHAT)
        assert not isinstance(refused.value, files.NotPrivate)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(mode=st.integers(0, 0o7777))
def test_any_mode_is_read_only_when_this_user_alone_can_read_it(tmp_path: Path, mode: int) -> None:
    path = key_file(tmp_path, "k\n", 0o600)
    path.chmod(mode)
    expected = not mode & 0o077 and os.access(path, os.R_OK)
    try:
        read_key(path, WHAT)
    except (OSError, ValueError):
        read = False
    else:
        read = True
    assert read == expected, f"{mode:04o}"


def test_another_users_key_file_is_refused_saying_the_chown(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    import pwd

    path = key_file(tmp_path, "k\n")
    nobody = pwd.getpwnam("nobody")
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(files.NotPrivate, match=f"belongs to uid {nobody.pw_uid}.*chown"):
        read_key(path, WHAT)


def test_the_service_key_is_in_the_data_folder_unless_named(tmp_path: Path) -> None:
    env = {"HOME": "/home/o", "XDG_DATA_HOME": "/xdg"}
    assert service_key_file(env) == "/xdg/coop/service.key"
    assert service_key_file({**env, "COOP_HOME": "/srv/coop"}) == "/srv/coop/service.key"
    assert service_key_file({**env, "COOP_SERVICE_KEY_FILE": "/etc/k"}) == "/etc/k"
