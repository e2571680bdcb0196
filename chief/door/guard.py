"""The door's guard: who may knock, checked in a fixed order before the body is looked at.

1. the peer address is in the accepted list (default 127.0.0.1, ::1)   403 peer_not_allowed
   (on a Unix socket no address: its file mode and the caller's uid from the kernel decided
   who connects, so 1 and 3 do not apply there)
2. no Origin, Cookie, X-Forwarded-For, Forwarded, X-Forwarded-Host, X-Real-IP or session
   header: nothing from a browser or a proxy                             403 forwarded_or_browser
3. the Host header names a loopback host (shuts DNS rebinding: a page can
   reach loopback, but never with a loopback Host)                       403 host_not_loopback
4. the service key, compared with hmac.compare_digest over SHA-256
   digests (fixed length, so a guess's length leaks nothing)             401 service_key_invalid
5. the security posture: normal passes                                   403 posture_blocked,
                                                 403 posture_locked, 503 posture_unavailable
6. the Chief belongs to the configured owner                             503 owner_unconfigured

Checks 1 to 3 are the floor's rules (`plumbing.loopback`), which every guard of the project reads.
The guard reads only the raw ASGI scope (peer, header bytes, and whether the server is a Unix
socket: `plumbing.loopback.on_unix_socket`), so it is the same whether the router runs in
`chief serve` (its Unix socket) or inside a host application. `check_caller` is checks 1 to 3
alone (the keyless `/metrics` on TCP).

Refusals are counted, not logged one line each (`say_refused`, over the door's
`plumbing.refusals.RefusalTally`): a reason's first refusal is one `door.refused` line at once,
then at most one summary line a minute (count, first peer, since), and
`coop_door_refusals_total{reason}` counts every one. A keyless client's flood is a line a
minute, so journald's rate limit never drops the real lines instead.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from chief.door.config import DoorConfig
from chief.door.posture import PostureSource
from chief.errors import PostureUnavailable
from plumbing.loopback import browser_header, host_is_loopback, peer_allowed
from plumbing.refusals import RefusalTally
from plumbing.wire import SERVICE_KEY_HEADER

if TYPE_CHECKING:
    from starlette.requests import Request

log = structlog.get_logger("chief.door")

_KEY_HEADER = SERVICE_KEY_HEADER.lower().encode("latin-1")


@dataclass(frozen=True)
class Refusal:
    """Why the guard turned a request away: the HTTP status and the `detail` word."""

    status: int
    reason: str


PEER_NOT_ALLOWED = Refusal(403, "peer_not_allowed")
FORWARDED_OR_BROWSER = Refusal(403, "forwarded_or_browser")
HOST_NOT_LOOPBACK = Refusal(403, "host_not_loopback")
SERVICE_KEY_INVALID = Refusal(401, "service_key_invalid")
POSTURE_BLOCKED = Refusal(403, "posture_blocked")
POSTURE_LOCKED = Refusal(403, "posture_locked")
POSTURE_UNAVAILABLE = Refusal(503, "posture_unavailable")
OWNER_UNCONFIGURED = Refusal(503, "owner_unconfigured")


@dataclass(frozen=True)
class Guard:
    """The six checks over one request's peer and headers; `check` answers the first refusal."""

    config: DoorConfig
    posture: PostureSource

    def check(
        self,
        peer: str | None,
        headers: Iterable[tuple[bytes, bytes]],
        *,
        owner_configured: bool,
        unix_socket: bool = False,
    ) -> Refusal | None:
        header_list = [(name.lower(), value) for name, value in headers]
        refusal = self.check_caller(peer, header_list, unix_socket=unix_socket)
        if refusal is not None:
            return refusal
        keys = [value for name, value in header_list if name == _KEY_HEADER]
        if len(keys) != 1 or not self._key_matches(keys[0]):
            return SERVICE_KEY_INVALID
        try:
            state = self.posture.read()
        except PostureUnavailable:
            return POSTURE_UNAVAILABLE
        if state == "blocked":
            return POSTURE_BLOCKED
        if state == "locked":
            return POSTURE_LOCKED
        if not owner_configured:
            return OWNER_UNCONFIGURED
        return None

    def check_caller(
        self, peer: str | None, headers: Iterable[tuple[bytes, bytes]], *, unix_socket: bool
    ) -> Refusal | None:
        """Checks 1 to 3: the peer, no browser or proxy header, the Host (1 and 3 not on a Unix
        socket)."""
        header_list = [(name.lower(), value) for name, value in headers]
        if not unix_socket and not peer_allowed(peer, self.config.allowed_peers):
            return PEER_NOT_ALLOWED
        if any(browser_header(name) for name, _ in header_list):
            return FORWARDED_OR_BROWSER
        if unix_socket:
            return None
        hosts = [value for name, value in header_list if name == b"host"]
        if len(hosts) != 1 or not host_is_loopback(hosts[0]):
            return HOST_NOT_LOOPBACK
        return None

    def _key_matches(self, presented: bytes) -> bool:
        # Digests of equal length make the comparison's time independent of the guess's length.
        digest = hashlib.sha256(presented.strip()).digest()
        return hmac.compare_digest(digest, self.config.service_key_digest)


def say_refused(tally: RefusalTally, reason: str, *, path: str, peer: str | None) -> None:
    """Count one refusal; log `door.refused` only when its reason's summary is due."""
    summary = tally.refused(reason, peer=peer, path=path)
    if summary is not None:
        log.warning("door.refused", **summary.fields())


async def read_body(request: Request, limit_bytes: int) -> bytes | None:
    """The request's body, or None once it passes `limit_bytes` (never buffering more than
    that): a caller cannot make a route hold an unbounded body."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
