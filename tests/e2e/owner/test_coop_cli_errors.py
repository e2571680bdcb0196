"""The `coop` CLI as a real process: every error the design names is one line with its exact
words (and, for a broken owner file, what was wrong on a line of its own), a non-zero exit, and
never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.procs import coop


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "COOP_HOME": str(tmp_path),
        "COOP_DB": str(tmp_path / "coop.db"),
        "COOP_ACTOR": "agent",
        "COOP_KICK": "off",
        "COOP_OWNER_FILE": "",
        "COOP_TEST_FAULTS": "",
    }


def _owner_file(tmp_path: Path, **changes: object) -> Path:
    credential = tmp_path / "coop.db.owner.key"
    credential.write_text("credential-0123456789\n")
    credential.chmod(0o600)
    body = {
        "mode": "service",
        "database": str(tmp_path / "coop.db"),
        "socket": str(tmp_path / "service.sock"),
        "credential_file": str(credential),
        **changes,
    }
    path = tmp_path / "coop.db.owner.json"
    path.write_text(json.dumps(body))
    path.chmod(0o600)  # as `coop cutover` writes it
    return path


def _lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return stderr.splitlines()


@pytest.mark.parametrize(
    ("broken", "detail"),
    [
        ("{not json", "is not valid JSON"),
        (json.dumps({"mode": "service"}), "names no database"),
        (json.dumps({"mode": "local", "database": "x"}), "mode must be 'service'"),
        (json.dumps(["service"]), "is not a JSON object"),
    ],
    ids=["invalid-json", "no-database", "wrong-mode", "not-an-object"],
)
def test_a_broken_owner_file_is_exactly_the_designs_sentence(
    tmp_path: Path, env: dict[str, str], broken: str, detail: str
) -> None:
    (tmp_path / "coop.db.owner.json").write_text(broken)
    (tmp_path / "coop.db.owner.json").chmod(0o600)  # private: broken inside only

    done = coop("todo", "add", "write the report", env=env)

    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert lines[0] == "coop: Invalid Coop owner configuration"
    assert len(lines) == 2
    assert detail in lines[1]
    assert not (tmp_path / "coop.db").exists(), "the ledger was opened"


def test_an_owner_socket_that_is_not_an_absolute_path_is_the_same_sentence(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _owner_file(tmp_path, socket="service.sock")

    done = coop("list", env=env)

    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert lines[0] == "coop: Invalid Coop owner configuration"
    assert "absolute path" in lines[1]


def test_an_older_builds_owner_file_naming_a_tcp_address_is_one_line_until_cutover_again(
    tmp_path: Path, env: dict[str, str]
) -> None:
    assert coop("todo", "add", "first", env=env).returncode == 0  # a ledger, in local mode
    path = _owner_file(tmp_path, socket=None, url="http://127.0.0.1:8764")
    body = json.loads(path.read_text())
    del body["socket"]
    path.write_text(json.dumps(body))

    done = coop("todo", "add", "write the report", env=env)

    assert done.returncode == 1
    (line,) = _lines(done.stderr)
    assert "names the owner service's TCP address 'http://127.0.0.1:8764'" in line
    assert "run `coop cutover` again" in line

    migrated = coop("cutover", env=env)

    assert migrated.returncode == 0, migrated.stderr
    assert f"every call now goes to the socket {tmp_path / 'service.sock'}" in migrated.stdout
    body = json.loads(path.read_text())
    assert body["socket"] == str(tmp_path / "service.sock")
    assert "url" not in body
    assert path.stat().st_mode & 0o777 == 0o600
    # Now it is a service that is not running: one line, nothing sent, nothing written.
    after = coop("todo", "add", "write the report", env=env)
    assert after.returncode == 1
    (line,) = _lines(after.stderr)
    assert "coop serve is not running" in line


def test_a_socket_in_a_folder_another_user_can_write_is_refused_before_a_byte(
    tmp_path: Path, env: dict[str, str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # anyone could have put a socket here
    path = shared / "service.sock"
    _owner_file(tmp_path, socket=str(path))
    with socket.socket(socket.AF_UNIX) as planted:
        planted.bind(str(path))
        planted.listen(1)
        planted.setblocking(False)

        done = coop("todo", "add", "write the report", env=env)

        with pytest.raises(BlockingIOError):
            planted.accept()  # nobody connected: not a byte, not the credential
    assert done.returncode == 1
    (line,) = _lines(done.stderr)
    assert line.startswith("coop: Coop owner refused: ")
    assert "no one else can write: nothing was sent" in line


def test_a_credential_others_can_read_is_refused_in_the_designs_words(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _owner_file(tmp_path)
    (tmp_path / "coop.db.owner.key").chmod(0o644)

    done = coop("todo", "add", "write the report", env=env)

    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert lines[0] == "coop: Coop credential must be private (0600)"
    assert "chmod 600" in lines[1]


def test_an_unusable_data_folder_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a folder")

    done = coop("todo", "add", "x", env={**env, "COOP_DB": str(in_the_way / "coop.db")})

    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert len(lines) == 1
    assert lines[0].startswith("coop: cannot open the Coop database at")
