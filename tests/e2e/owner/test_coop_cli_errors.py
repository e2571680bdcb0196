"""The `coop` CLI as a real process: every error the design names is one line with its exact
words (and, for a broken owner file, what was wrong on a line of its own), a non-zero exit, and
never a traceback."""

from __future__ import annotations

import json
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
        "url": "http://127.0.0.1:9",
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


def test_an_owner_url_off_loopback_is_the_same_sentence(
    tmp_path: Path, env: dict[str, str]
) -> None:
    _owner_file(tmp_path, url="http://example.com:8764")

    done = coop("list", env=env)

    assert done.returncode == 1
    lines = _lines(done.stderr)
    assert lines[0] == "coop: Invalid Coop owner configuration"
    assert "http on loopback" in lines[1]


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
