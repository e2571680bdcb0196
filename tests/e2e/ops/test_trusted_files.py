"""The files the services trust are refused, not repaired, when another local user could have
written or read them: the service key (the door's and the notifier's readers), the owner file
and the owner credential (the `coop` CLI's), and the Telegram pairing file (the door's). Each
case is a real process that must exit non-zero with one line naming the file and what to run,
and no traceback.

"Another user's" files are chowned to `nobody`: only root can, so those cases skip elsewhere.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.procs import Service, clean_env, coop, write_key
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(120)

KEY = "trusted-files-key-0123456789"
BOT_TOKEN = "123456:trusted-token"
NO_SERVICE = "http://127.0.0.1:9"
WAIT_S = 30.0


def _loosen(path: Path) -> str:
    path.chmod(0o640)
    return "chmod 600"


def _give_away(path: Path) -> str:
    if os.geteuid() != 0:
        pytest.skip("handing a file to another user needs root")
    nobody = pwd.getpwnam("nobody")
    os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return "chown"


SPOILERS: dict[str, Callable[[Path], str]] = {"group-readable": _loosen, "nobody's": _give_away}


def _refused_in_one_line(status: int, stderr: str, path: Path, fix: str) -> None:
    assert status != 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if str(path) in line]
    assert len(lines) == 1, stderr
    assert fix in lines[0], stderr


def _env(folder: Path, **settings: str) -> dict[str, str]:
    base = {
        "COOP_SERVICE_KEY_FILE": str(folder / "service.key"),
        "COOP_ACTOR": "agent",
        "COOP_KICK": "off",
        "CHIEF_OWNER": "owner",
        "CHIEF_METRICS_PORT": "off",
    }
    return clean_env(folder, **(base | settings))


def _refused_at_start(service: Service) -> tuple[int, str]:
    """Start `service` and wait until it exits (a refusal) or listens (accepted: the test fails
    with what it logged)."""
    service.start(wait=False)
    try:
        wait_until_sync(
            lambda: not service.running or service.events(service.listening_event),
            timeout_s=WAIT_S,
            what=f"{service.name} to exit or listen",
        )
        assert not service.running, f"{service.name} started anyway:\n{service.log_tail()}"
        return service.wait_exit(), service.log()
    finally:
        if service.running:
            service.kill()


# A group-readable key was refused before this rule too (tests/unit/door, tests/unit/notifier
# and the contract's every-mode property hold it): only another user's key is started for here.
def test_a_service_key_another_user_owns_stops_the_door_and_the_notifier(tmp_path: Path) -> None:
    key = write_key(tmp_path / "service.key", KEY)
    fix = _give_away(key)
    door = Service("door", ["chief", "serve"], tmp_path, "door.listening", _env(tmp_path),
                   takes_port=False)  # fmt: skip
    notifier = Service("notifier", ["notifier", "run"], tmp_path, "notifier.daemon.started",
                       _env(tmp_path), takes_port=False)  # fmt: skip

    for service in (door, notifier):
        status, log = _refused_at_start(service)
        _refused_in_one_line(status, log, key, fix)


@pytest.mark.parametrize("spoil", SPOILERS, ids=str)
def test_a_pairing_file_not_private_to_this_user_stops_the_door(tmp_path: Path, spoil: str) -> None:
    write_key(tmp_path / "service.key", KEY)
    pairing = tmp_path / "telegram-pairing.json"
    document = {"chat_id": 666, "user_id": 666, "username": None, "first_name": None,
                "bot": "@coop_bot", "paired_at": "2026-12-01T17:30:00+00:00"}  # fmt: skip
    write_key(pairing, json.dumps(document))
    fix = SPOILERS[spoil](pairing)
    env = _env(tmp_path, TELEGRAM_BOT_TOKEN=BOT_TOKEN, TELEGRAM_API_BASE=NO_SERVICE + "/bot")
    door = Service("door", ["chief", "serve"], tmp_path, "door.listening", env,
                   takes_port=False)  # fmt: skip

    status, log = _refused_at_start(door)

    _refused_in_one_line(status, log, pairing, fix)


def _owner_file(folder: Path) -> tuple[Path, Path]:
    """An owner file (service mode) naming a credential, both 0600 and this user's."""
    db = folder / "coop.db"
    credential = write_key(folder / "coop.db.owner.key", "owner-credential")
    document = {"mode": "service", "database": str(db), "socket": str(folder / "service.sock"),
                "credential_file": str(credential)}  # fmt: skip
    owner = write_key(folder / "coop.db.owner.json", json.dumps(document))
    return owner, credential


@pytest.mark.parametrize("spoil", SPOILERS, ids=str)
@pytest.mark.parametrize("which", ["owner file", "owner credential"])
def test_an_owner_file_or_credential_not_private_to_this_user_stops_every_coop_call(
    tmp_path: Path, spoil: str, which: str
) -> None:
    owner, credential = _owner_file(tmp_path)
    spoiled = owner if which == "owner file" else credential
    fix = SPOILERS[spoil](spoiled)

    done: subprocess.CompletedProcess[str] = coop(
        "todo", "add", "routed", env=_env(tmp_path), inherit=False
    )

    _refused_in_one_line(done.returncode, done.stderr, spoiled, fix)
