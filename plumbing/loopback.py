"""Who may knock on a loopback listener, from the request's peer and header bytes alone.

    peer_address(peer)         a request's peer as an address (an IPv4-mapped IPv6 one
                               unwrapped, a zone dropped), None when it is not one
    peer_is_loopback(peer)     that address is 127.0.0.1 or ::1; `peer_allowed(peer, allowed)`
                               the same against a configured list (the door's
                               CHIEF_ALLOWED_PEERS)
    host_is_loopback(raw)      the Host names exactly 127.0.0.1, localhost or [::1], with or
                               without a port: a browser page can reach loopback, but never with
                               a loopback Host, so this shuts DNS rebinding
    browser_header(name)       a header only a browser or a proxy sends (Origin, Cookie, the
                               forwarding ones, a host application's session header)
    cross_site(value)          a `Sec-Fetch-Site` a page on another origin sends

Every guard reads these rules here: the engine service's (`engine.owner.app`), the door's
(`chief.door.guard`) and the Telegram emulator's. Standard library only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

#: Peer addresses a loopback listener answers.
LOOPBACK_PEERS = frozenset({"127.0.0.1", "::1"})
#: Host names a loopback request may carry (IPv6 in brackets).
LOOPBACK_HOST_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
MAX_PORT_DIGITS = 5
#: Headers only a browser or a proxy sends: a request carrying one never came from a local
#: client of the project.
BROWSER_HEADERS = frozenset(
    {"origin", "cookie", "x-forwarded-for", "forwarded", "x-forwarded-host", "x-real-ip"}
)
#: Session headers of host applications (X-Session-Id, X-Host-Session, ...).
SESSION_MARKER = "session"
#: `Sec-Fetch-Site` values a browser sends for a request a page on another origin started
#: (`same-site` included: a page on another loopback port is same-site).
CROSS_SITE_FETCHES = frozenset({"cross-site", "same-site"})


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def peer_address(peer: str | None) -> Address | None:
    """A request's peer as an address: an IPv4-mapped IPv6 one unwrapped, a zone dropped; None
    for no peer or anything that is not an address."""
    if peer is None:
        return None
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def peer_allowed(peer: str | None, allowed: frozenset[Address]) -> bool:
    """True when the request's peer address (as `peer_address` reads it) is in `allowed`."""
    address = peer_address(peer)
    return address is not None and address in allowed


def peer_is_loopback(peer: str | None) -> bool:
    """True when a request's peer address is one of `LOOPBACK_PEERS`."""
    address = peer_address(peer)
    return address is not None and str(address) in LOOPBACK_PEERS


def host_is_loopback(raw: str | bytes) -> bool:
    """True for exactly `127.0.0.1`, `localhost` or `[::1]`, each with or without a port."""
    try:
        text = raw.decode("ascii") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return False
    if not text.isascii():
        return False
    host = text.strip().lower()
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


def browser_header(name: str | bytes) -> bool:
    """True for a header name (any case) only a browser or a proxy sends."""
    text = name.decode("latin-1") if isinstance(name, bytes) else name
    lowered = text.lower()
    return lowered in BROWSER_HEADERS or SESSION_MARKER in lowered


def cross_site(value: str | bytes) -> bool:
    """True for a `Sec-Fetch-Site` value a page on another origin sends."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return text.strip().lower() in CROSS_SITE_FETCHES


def on_unix_socket(scope: Mapping[str, Any]) -> bool:
    """Whether an ASGI request came in on a Unix socket: uvicorn names the listening socket's
    path as the `server`, `(path, None)`, where TCP gives `(host, port)`; the server sets it,
    never the caller."""
    server = scope.get("server")
    return (
        isinstance(server, list | tuple)
        and len(server) == 2
        and isinstance(server[0], str)
        and server[1] is None
    )
