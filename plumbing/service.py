"""Where the engine service (`coop serve`) is reached: the one fact it and every client of it
share (the engine's own calls after a cutover, `coop status`, the door's link to the ledger).

The service's whole app is served on a Unix socket in the private data folder
(`plumbing.unix`): only the service's user can create it, so a client that checked it is
talking to that user's process, and a squatter on a loopback port gets nothing. Only
`/metrics`, read-only and keyless, stays on TCP for Prometheus (`COOP_METRICS_PORT`).

    COOP_SERVICE_SOCKET   the service's socket; default <COOP_HOME>/service.sock

Standard library only, and no pathlib: the `coop` CLI's cold path may load it.
"""

from __future__ import annotations

import os

from plumbing import home

# `typing` stays off the CLI's cold path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SOCKET_SETTING = "COOP_SERVICE_SOCKET"
SOCKET_NAME = "service.sock"


def socket_path(env: Mapping[str, str]) -> str:
    """The service's socket: `COOP_SERVICE_SOCKET` (not blank, `~` expanded), else
    `service.sock` in the data folder (`plumbing.home`). A relative
    path raises `ValueError` naming the setting: a client and the service started from other
    folders would look in different places."""
    raw = env.get(SOCKET_SETTING, "").strip()
    if not raw:
        return os.path.normpath(os.path.join(home.data_folder(env), SOCKET_NAME))
    path = os.path.expanduser(raw)
    if not os.path.isabs(path):
        raise ValueError(f"{SOCKET_SETTING}={raw!r} must be an absolute path")
    return os.path.normpath(path)
