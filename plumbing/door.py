"""Where the door (`chief serve`) is reached: the one fact the door and every client of it share.

The door's whole app is served on a Unix socket in the private data folder (`plumbing.unix`):
only the door's user can create it, so a client that checked it (`check_private`) is talking to
that user's process, and a squatter on a loopback port gets nothing. Only `/metrics`, read-only
and keyless, stays on TCP for Prometheus (`CHIEF_METRICS_PORT`).

    COOP_DOOR_SOCKET   the door's socket; default <COOP_HOME>/door.sock (beside chief.db)

The settings that named a TCP door (`COOP_DOOR_URL`, `CHIEF_PORT`, `CHIEF_HOST`) are refused
where they were read, in one line saying what to set instead (`retired_setting`): an install
that still names one must not go on sending its key to a port.

Standard library only, and no pathlib: the `coop` CLI's cold path may load it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from plumbing import home

SOCKET_SETTING = "COOP_DOOR_SOCKET"
SOCKET_NAME = "door.sock"
#: The URL base a client's requests carry over the socket. The door checks no Host on its
#: socket (a browser cannot reach a Unix socket, so DNS rebinding does not apply), and a
#: loopback name keeps the request acceptable to the Host rule wherever it still holds.
BASE_URL = "http://localhost"

#: Each retired setting and what to set instead.
RETIRED: Mapping[str, str] = {
    "COOP_DOOR_URL": (
        "the door is reached on its Unix socket only: unset COOP_DOOR_URL, and set "
        f"{SOCKET_SETTING} if the socket is not <COOP_HOME>/{SOCKET_NAME}"
    ),
    "CHIEF_PORT": (
        "the door listens on its Unix socket (COOP_DOOR_SOCKET) and serves only /metrics on "
        "TCP: unset CHIEF_PORT, and set CHIEF_METRICS_PORT for /metrics (default 8765, 0 any, "
        "off none)"
    ),
    "CHIEF_HOST": (
        "the door listens on its Unix socket (COOP_DOOR_SOCKET) and /metrics on 127.0.0.1 only: "
        "unset CHIEF_HOST"
    ),
}


def retired_setting(env: Mapping[str, str]) -> str | None:
    """One line naming the first retired door setting `env` still sets (not blank), and what
    to set instead; None when there is none."""
    for name, instead in RETIRED.items():
        if env.get(name, "").strip():
            return f"{name} is no longer read: {instead}"
    return None


def socket_path(env: Mapping[str, str]) -> str:
    """The door's socket: `COOP_DOOR_SOCKET` (not blank, `~` expanded, made absolute), else
    `door.sock` in the data folder (`plumbing.home`)."""
    raw = env.get("COOP_DOOR_SOCKET", "").strip()
    return os.path.abspath(
        os.path.expanduser(raw or os.path.join(home.data_folder(env), SOCKET_NAME))
    )


def socket_origin(env: Mapping[str, str]) -> str:
    """Which setting named the door's socket (`socket_path`), for a line that says nothing
    listens there: `COOP_DOOR_SOCKET`, or the default that applies without it."""
    if env.get("COOP_DOOR_SOCKET", "").strip():
        return "COOP_DOOR_SOCKET"
    return "COOP_DOOR_SOCKET is not set: the default, door.sock in COOP_HOME"


def not_running(path: str) -> str:
    """What a client says when nothing answers at the door's socket."""
    return f"the door is not running: nothing listens at {path}"
