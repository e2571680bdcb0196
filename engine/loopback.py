"""The engine's loopback facts: which peers and Host headers count as loopback, and the one way
the engine makes an HTTP call (to the owner service, to the notify door's status).

The peer rule is the door's (`chief.door.guard.peer_allowed` with its default peers), and the
Host rule too; both are copied here on purpose, because the packages share no code.

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

import ipaddress
import urllib.request
from http.client import HTTPResponse

#: Peer addresses the engine service answers (the door's default `CHIEF_ALLOWED_PEERS`).
LOOPBACK_PEERS = frozenset({"127.0.0.1", "::1"})
#: Host names a loopback request may carry (the door's `LOOPBACK_HOSTS`; IPv6 in brackets).
LOOPBACK_HOST_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
#: Hosts a loopback URL may name, as `urlsplit(...).hostname` gives them (IPv6 without brackets).
LOOPBACK_URL_HOSTS = LOOPBACK_PEERS | {"localhost"}
MAX_PORT_DIGITS = 5


def peer_is_loopback(peer: str | None) -> bool:
    """True when a request's peer address is one of `LOOPBACK_PEERS`.

    Twin of `chief.door.guard.peer_allowed` over the door's default peers: keep them alike."""
    if peer is None:
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address) in LOOPBACK_PEERS


def host_is_loopback(raw: str) -> bool:
    """True for exactly `127.0.0.1`, `localhost` or `[::1]`, each with or without a port.

    Twin of `chief.door.guard.host_is_loopback` (which reads header bytes): keep them alike."""
    host = raw.strip().lower()
    if not host.isascii():
        return False
    name, port = host, ""
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            return False
        name, rest = host[: close + 1], host[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
            if not port:
                return False
    elif ":" in host:
        name, port = host.split(":", 1)
        if not port:
            return False
    if port and not (port.isdigit() and len(port) <= MAX_PORT_DIGITS):
        return False
    return name in LOOPBACK_HOST_NAMES


def open_url(request: urllib.request.Request, timeout_s: float) -> HTTPResponse:
    """Send `request` straight to its host: no proxy, whatever the environment says.

    An HTTP error status raises `urllib.error.HTTPError` (which carries the answer), as
    `urlopen` does; anything else that fails raises `OSError` or `ValueError`."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    response: HTTPResponse = opener.open(request, timeout=timeout_s)
    return response
