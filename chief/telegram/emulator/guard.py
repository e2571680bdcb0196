"""The emulator's guard: who may knock, checked in a fixed order on the peer and the header
bytes, before any route runs (the door's rules, `plumbing.loopback`).

1. the peer address is loopback (127.0.0.1, ::1)                       403 peer_not_allowed
2. no Origin, Cookie, X-Forwarded-For, Forwarded, X-Forwarded-Host, X-Real-IP or session
   header: nothing from a browser or a proxy                             403 forwarded_or_browser
3. no `Sec-Fetch-Site: cross-site` (or same-site): no page of another
   origin, whatever else it managed to leave out                         403 cross_site
4. exactly one Host, naming a loopback host (shuts DNS rebinding: a
   page can reach loopback, but never with a loopback Host)              403 host_not_loopback
5. a POST to a control endpoint (`/emulator/...`) says
   `Content-Type: application/json`: a page may post a form or
   text/plain anywhere without asking first, never JSON                  415 json_only

The Bot API routes (`/bot<token>/...`) take what python-telegram-bot sends: no Origin, a
loopback Host, a form body. A refusal answers at once, Telegram's way (`{"ok": false,
"error_code", "description"}`); refusals are counted and summed up in one `emulator.refused`
line per reason at most a minute (`plumbing.refusals`), not one line each.
"""

from __future__ import annotations

import structlog
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from plumbing.loopback import browser_header, cross_site, host_is_loopback, peer_is_loopback
from plumbing.refusals import RefusalTally

log = structlog.get_logger("chief.telegram.emulator")

CONTROL_PREFIX = "/emulator/"
JSON_TYPE = "application/json"


def refusal(scope: Scope) -> tuple[int, str] | None:
    """The first check `scope` fails, as (status, reason), or None to let it in."""
    client = scope.get("client")
    if not peer_is_loopback(client[0] if client else None):
        return 403, "peer_not_allowed"
    headers = [(name.lower(), value) for name, value in scope.get("headers", [])]
    if any(browser_header(name) for name, _ in headers):
        return 403, "forwarded_or_browser"
    if any(name == b"sec-fetch-site" and cross_site(value) for name, value in headers):
        return 403, "cross_site"
    hosts = [value for name, value in headers if name == b"host"]
    if len(hosts) != 1 or not host_is_loopback(hosts[0]):
        return 403, "host_not_loopback"
    if scope.get("method") == "POST" and str(scope.get("path", "")).startswith(CONTROL_PREFIX):
        types = [value for name, value in headers if name == b"content-type"]
        media = types[0].split(b";", 1)[0].strip().lower() if len(types) == 1 else b""
        if media != JSON_TYPE.encode():
            return 415, "json_only"
    return None


class EmulatorGuard:
    """Pure ASGI middleware: `refusal` on every HTTP request, the refused answered at once."""

    def __init__(self, app: ASGIApp, tally: RefusalTally) -> None:
        self.app = app
        self.tally = tally

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = refusal(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, reason = refused
        client = scope.get("client")
        summary = self.tally.refused(
            reason, peer=client[0] if client else None, path=str(scope.get("path", ""))
        )
        if summary is not None:
            log.warning("emulator.refused", **summary.fields())
        answer = JSONResponse(
            {"ok": False, "error_code": status, "description": reason},
            status_code=status,
            headers={"Connection": "close"},  # its unread body is never read
        )
        await answer(scope, receive, send)
