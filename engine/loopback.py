"""The engine's loopback facts: which peers and Host headers count as loopback, and the one way
the engine makes an HTTP call (to the owner service, to the notify door's status).

The peer rule and the Host rule are the floor's (`plumbing.loopback`, which the Telegram
emulator's guard reads too); the door's guard keeps a copy (`chief.door.guard.peer_allowed` with
its default peers, `host_is_loopback`).

Every HTTP call the engine makes goes to a loopback service and carries a secret (the owner
credential, the service key), so none of them may follow a proxy the environment names
(`http_proxy`, `HTTPS_PROXY`, `ALL_PROXY`, ...): `open_url` never consults the environment.

- a peer is loopback when its address, an IPv4-mapped IPv6 one unwrapped and a zone dropped, is
  `127.0.0.1` or `::1`;
- a Host is loopback when it is exactly `127.0.0.1`, `localhost` or `[::1]`, with or without a
  port. A browser page can reach loopback, but never with a loopback Host, so this shuts DNS
  rebinding.

`tests/contract/test_shared_facts.py` fails if the engine's and the door's copies ever answer
differently.

Standard library only: the `coop` CLI imports this.
"""

from __future__ import annotations

import urllib.request
from http.client import HTTPResponse

from plumbing.loopback import (
    LOOPBACK_HOST_NAMES,
    LOOPBACK_PEERS,
    MAX_PORT_DIGITS,
    host_is_loopback,
    peer_is_loopback,
)

__all__ = [
    "LOOPBACK_HOST_NAMES",
    "LOOPBACK_PEERS",
    "LOOPBACK_URL_HOSTS",
    "MAX_PORT_DIGITS",
    "host_is_loopback",
    "open_url",
    "peer_is_loopback",
]

#: Hosts a loopback URL may name, as `urlsplit(...).hostname` gives them (IPv6 without brackets).
LOOPBACK_URL_HOSTS = LOOPBACK_PEERS | {"localhost"}


def open_url(request: urllib.request.Request, timeout_s: float) -> HTTPResponse:
    """Send `request` straight to its host: no proxy, whatever the environment says.

    An HTTP error status raises `urllib.error.HTTPError` (which carries the answer), as
    `urlopen` does; anything else that fails raises `OSError` or `ValueError`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    response: HTTPResponse = opener.open(request, timeout=timeout_s)
    return response
