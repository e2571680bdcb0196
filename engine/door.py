"""The notify door's status, asked over its Unix socket for `coop status`: undelivered Chief
reports, sent count, posture, whether Telegram is configured, the door's Telegram queue and its
urgent reports (`urgent`: ringing, and expired unacknowledged, which `--check` names).

Standard library only (http.client over the socket, `plumbing.http.client`): the socket and its
folder are checked to be this user's and private, and the process answering to run as this
user, before the service key (read only from a 0600 file, `engine.keyfile`) is sent. A retired
setting that named a TCP door (`COOP_DOOR_URL`, ...) is refused in one line, nothing sent.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Mapping
from typing import Any

from engine import keyfile
from engine.errors import KeyFileError
from plumbing import door as door_address
from plumbing.http.client import UnixHTTPConnection
from plumbing.keyfile import service_key_file
from plumbing.wire import SERVICE_KEY_HEADER, STATUS_PATH

DOOR_TIMEOUT_S = 2.0


def door_status(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Ask the door how it is; `{"answered": False, "error": ...}` when it does not answer.

    `url` in the answer names where it was asked: the socket's path. The service key is read
    through the engine's one key reader (refused unless 0600) and sent only once the socket
    is checked (the module docstring)."""
    env = os.environ if environ is None else environ
    retired = door_address.retired_setting(env)
    path = door_address.socket_path(env)
    if retired is not None:
        return {"answered": False, "url": path, "error": retired}
    try:
        key = read_service_key(env)
    except KeyFileError as exc:
        return {"answered": False, "url": path, "error": exc.message}
    connection = UnixHTTPConnection(path, DOOR_TIMEOUT_S)
    try:
        connection.request("GET", STATUS_PATH, headers={SERVICE_KEY_HEADER: key})
        response = connection.getresponse()
        raw = response.read()
    except (FileNotFoundError, ConnectionRefusedError):
        return {"answered": False, "url": path, "error": "the door is not running"}
    except (OSError, http.client.HTTPException) as exc:
        return {"answered": False, "url": path, "error": plain_error(exc)}
    finally:
        connection.close()
    if response.status != 200:
        # The door's refusals name their reason (posture_blocked, owner_unconfigured, ...).
        try:
            reason = json.loads(raw).get("detail")
        except (ValueError, AttributeError):
            reason = None
        error = f"HTTP {response.status}" + (f" {reason}" if reason else "")
        # Its status is kept as a number: a 401 is a refused key, not a door that is down.
        return {"answered": False, "url": path, "error": error, "http_status": response.status}
    try:
        answer = json.loads(raw)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return {"answered": False, "url": path, "error": "the door's answer is not a JSON object"}
    return {"answered": True, "url": path, **answer}


def plain_error(exc: Exception) -> str:
    """Why a connection failed, in the system's words (`Connection refused`), without Python's
    `[Errno 111]` or urllib's `<urlopen error ...>` wrapping; a refusal of ours, as it says."""
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


def read_service_key(env: Mapping[str, str]) -> str:
    """The shared service key, through the engine's one key reader (refused unless 0600)."""
    return keyfile.read_private(service_key_file(env), "the service key")
