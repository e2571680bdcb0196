"""The notify door's status, asked over loopback HTTP for `coop status`: undelivered Chief
reports, sent count, posture, whether Telegram is configured, the door's Telegram queue and its
urgent reports (`urgent`: ringing, and expired unacknowledged, which `--check` names).

Standard library only (urllib, never through a proxy: `engine.loopback.open_url`), and the
service key only from a 0600 file (`engine.keyfile`).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine import keyfile, loopback
from engine.config import data_home
from engine.errors import KeyFileError

# Shared with the notifier and the door, which keep their own copies (the packages share no
# code): tests/contract/test_shared_facts.py fails if any copy differs.
DEFAULT_DOOR_URL = "http://127.0.0.1:8765/api/coop/engine/notify"  # notifier.config, chief.door
SERVICE_KEY_HEADER = "X-Coop-Service-Key"  # notifier.client, chief.door.guard
SERVICE_KEY_FILE_NAME = "service.key"  # notifier.config, chief.door.config
DOOR_TIMEOUT_S = 2.0


def door_status(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Ask the door how it is; `{"answered": False, "error": ...}` when it does not answer.

    The service key is read through the engine's one key reader (refused unless 0600) and sent
    straight to the door, never through a proxy the environment names."""
    env = os.environ if environ is None else environ
    notify_url = env.get("COOP_DOOR_URL") or DEFAULT_DOOR_URL
    url = door_status_url(notify_url)
    try:
        # A port past 65535 is not an error to urllib: the socket layer takes it modulo 65536.
        urllib.parse.urlsplit(notify_url).port  # noqa: B018 - raises ValueError out of range
    except ValueError:
        return {
            "answered": False,
            "url": url,
            "error": "COOP_DOOR_URL has no valid port (1..65535)",
        }
    try:
        key = read_service_key(env)
    except KeyFileError as exc:
        return {"answered": False, "url": url, "error": exc.message}
    request = urllib.request.Request(url, headers={SERVICE_KEY_HEADER: key})  # noqa: S310
    try:
        with loopback.open_url(request, DOOR_TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        # The door's refusals name their reason (posture_blocked, owner_unconfigured, ...).
        with exc:
            try:
                reason = json.loads(exc.read()).get("detail")
            except (OSError, ValueError, AttributeError):
                reason = None
        error = f"HTTP {exc.code}" + (f" {reason}" if reason else "")
        # Its status is kept as a number: a 401 is a refused key, not a door that is down.
        return {"answered": False, "url": url, "error": error, "http_status": exc.code}
    except (OSError, ValueError) as exc:
        return {"answered": False, "url": url, "error": plain_error(exc)}
    if not isinstance(answer, dict):
        return {"answered": False, "url": url, "error": "the door's answer is not a JSON object"}
    return {"answered": True, "url": url, **answer}


def plain_error(exc: Exception) -> str:
    """Why a connection failed, in the system's words (`Connection refused`), without Python's
    `[Errno 111]` or urllib's `<urlopen error ...>` wrapping."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


def service_key_file(env: Mapping[str, str]) -> Path:
    """Where the shared service key lives: COOP_SERVICE_KEY_FILE, else <data folder>/service.key."""
    return Path(env.get("COOP_SERVICE_KEY_FILE") or data_home(env) / SERVICE_KEY_FILE_NAME)


def read_service_key(env: Mapping[str, str]) -> str:
    """The shared service key, through the engine's one key reader (refused unless 0600)."""
    return keyfile.read_private(service_key_file(env).expanduser(), "the service key")


def door_status_url(notify_url: str) -> str:
    """The door's status endpoint beside its notify endpoint (`.../engine/notify` ->
    `.../engine/status`, the door's STATUS_PATH)."""
    return notify_url.rsplit("/", 1)[0] + "/status"
