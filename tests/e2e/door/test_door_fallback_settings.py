"""`chief serve` with a wrong fallback setting, as a real process: one line on stderr naming the
setting, exit 2, no traceback, nothing bound (issue 35: bad settings are one line each at
start), and a password in the environment is a warning naming the file setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.door.conftest import Harness, clean_env, spawn_door
from tests.support.door import BOT_TOKEN, CHAT_ID, write_key

pytestmark = pytest.mark.timeout(120)


def serve(folder: Path, **settings: str) -> list[str]:
    write_key(folder)
    env = clean_env(folder, TELEGRAM_BOT_TOKEN=BOT_TOKEN, TELEGRAM_CHAT_ID=CHAT_ID, **settings)
    result = subprocess.run(
        [sys.executable, "-m", "chief", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert not (folder / "door.sock").exists()
    said = [line for line in result.stderr.splitlines() if line.startswith("chief serve:")]
    assert len(said) == 1, result.stderr
    return said


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"CHIEF_FALLBACK_URLS": "mailto://coop:hunter2@example.org?port=abc x"},
         "CHIEF_FALLBACK_URLS: URL 2 of 2"),
        ({"CHIEF_FALLBACK_URLS": "ntfys://coop-topic", "CHIEF_FALLBACK_AFTER_S": "10"},
         "CHIEF_FALLBACK_AFTER_S='10'"),
        ({"CHIEF_FALLBACK_URLS": "ntfys://coop-topic", "CHIEF_FALLBACK_MAX_PER_HOUR": "0"},
         "CHIEF_FALLBACK_MAX_PER_HOUR='0'"),
        ({"CHIEF_FALLBACK_URLS_FILE": "/nonexistent/fallback-urls"},
         "CHIEF_FALLBACK_URLS_FILE /nonexistent/fallback-urls cannot be read"),
    ],
)  # fmt: skip
def test_a_wrong_fallback_setting_stops_the_door_in_one_line(
    tmp_path: Path, settings: dict[str, str], named: str
) -> None:
    (line,) = serve(tmp_path, **settings)
    assert named in line, line
    assert "hunter2" not in line


def test_a_url_file_others_can_read_stops_the_door_in_one_line(tmp_path: Path) -> None:
    urls = tmp_path / "fallback-urls"
    urls.write_text("mailto://coop:hunter2@example.org\n")
    urls.chmod(0o644)
    (line,) = serve(tmp_path, CHIEF_FALLBACK_URLS_FILE=str(urls))
    assert line.startswith(f"chief serve: CHIEF_FALLBACK_URLS_FILE {urls}"), line
    assert "chmod" in line
    assert "hunter2" not in line


def test_a_password_in_the_environment_starts_the_door_with_a_warning_naming_the_file_setting(
    harness: Harness,
) -> None:
    door = spawn_door(harness.env(CHIEF_FALLBACK_URLS="mailtos://coop:hunter2@example.org"))
    warned = door.wait_event("door.fallback_password_in_environment")
    assert "CHIEF_FALLBACK_URLS_FILE" in warned["hint"]
    door.wait_event("door.fallback_configured")
    assert "hunter2" not in door.log()
