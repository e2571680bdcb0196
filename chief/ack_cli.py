"""`chief ack N` (parsed by `chief.cli`): acknowledge an urgent report on the machine.

The running door rings urgent reports, so the acknowledgement goes to it, on its Unix socket
with the service key (`POST /api/chief/urgent/ack`, `chief.door.ack_route`; the socket and its
folder checked private to this user before the key is sent). The door stops every rung of the
report's ladder, edits each message still ringing to say it was acknowledged on the machine,
and lands one Chief line. N is the report's number (the door's status, `coop status`, the
phone's /status), or its urgent key.

Exit 0 acknowledged (or acknowledged before: said so); 1 no such report, the door not running
or refusing; 2 a bad N or setting. Each failure is one line on stderr.
"""

from __future__ import annotations

import http.client
import json
import sys
from datetime import datetime

from chief.errors import ChiefConfigError, DoorError
from chief.urgent_rules import ACK_PATH
from plumbing.terminal import shown

ACK = "chief ack"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
ACK_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 64 * 1024


def _fail(words: str, code: int = EXIT_FAILED) -> int:
    print(shown(f"{ACK}: {words}"), file=sys.stderr)
    return code


def ack(reference: str) -> int:
    from chief.cron import DoorUnusable
    from chief.door_address import door_address

    if not _readable(reference):
        return _fail(f"{reference!r} is no report number (see `coop status`)", EXIT_USAGE)
    try:
        door = door_address()
    except (DoorError, ChiefConfigError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    if isinstance(door, DoorUnusable):
        return _fail(door.reason, EXIT_USAGE)
    try:
        status, payload = _post(door.socket_path, door.service_key, reference)
    except FileNotFoundError:
        return _fail("the door (`chief serve`) is not running: start it, then ack again")
    except PermissionError as exc:
        return _fail(f"the door's socket is refused: {exc}")
    except (OSError, http.client.HTTPException) as exc:
        return _fail(f"the door (`chief serve`) did not answer ({type(exc).__name__})")
    return _said(reference, status, payload)


def _post(socket_path: str, key: str, reference: str) -> tuple[int, dict[str, object]]:
    """POST the acknowledgement on the door's checked socket (`plumbing.http.client`: the
    socket and its folder this user's, before the key is sent); its status and JSON body."""
    from plumbing.http.client import UnixHTTPConnection
    from plumbing.wire import SERVICE_KEY_HEADER

    connection = UnixHTTPConnection(socket_path, ACK_TIMEOUT_S)
    try:
        body = json.dumps({"report": reference}).encode("utf-8")
        headers = {SERVICE_KEY_HEADER: key, "Content-Type": "application/json"}
        connection.request("POST", ACK_PATH, body=body, headers=headers)
        reply = connection.getresponse()
        raw = reply.read(MAX_ANSWER_BYTES)
        try:
            document = json.loads(raw)
        except ValueError:
            document = {}
        return reply.status, document if isinstance(document, dict) else {}
    finally:
        connection.close()


def _readable(reference: str) -> bool:
    return (
        bool(reference)
        and len(reference) <= 200
        and reference.isascii()
        and all(ch.isalnum() or ch in "_.:-" for ch in reference)
    )


def _said(reference: str, status: int, payload: dict[str, object]) -> int:
    if status == 404:
        return _fail(f"no urgent report {reference} (see `coop status` for their numbers)")
    if status != 200:
        return _fail(f"the running door refused it ({status} {payload.get('detail', '')})")
    at = payload.get("acked_at")
    clock = datetime.fromtimestamp(float(str(at))).strftime("%H:%M") if at is not None else "?"
    if payload.get("acknowledged"):
        print(shown(f"{ACK}: urgent report {reference} acknowledged at {clock}; it stops ringing"))
    else:
        print(shown(f"{ACK}: urgent report {reference} was acknowledged already (at {clock})"))
    return EXIT_OK
