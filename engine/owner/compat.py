"""The compatibility client: one call to the owner service, failing closed, with a receipt.

`engine.api` calls `remote()` when an owner file governs the database. In order:

1. the owner URL must be plain http on a loopback host, else `Invalid Coop owner
   configuration` (the credential never leaves the machine);
2. the credential file must be private: any group or world bit raises
   `Coop credential must be private (0600)`;
3. a fresh request key is minted and an `uncertain` receipt is written (`engine.owner.receipts`);
4. one POST to `<url>/compat/call`, never retried: a request whose HTTP outcome is uncertain
   may already have committed, so the caller gets the key to reconcile instead.

    unreachable (socket error, bad answer)  `Coop owner unavailable; no local write attempted;
                                            reconcile request <key>`        receipt uncertain
    5xx                                     `Coop owner failed (HTTP n); reconcile request <key>`
                                                                            receipt uncertain
      (a read, `engine.verbs.READS`, changes nothing: its receipt settles `rejected` with the
      outcome `unanswered_read` instead of waiting for a reconcile that could only say so)
    4xx without a verdict                   `Coop refused the request (HTTP n): <detail>`
                                                                            receipt rejected
    a domain verdict                        the same error type, the same words   rejected
    success                                 the result                            committed

Nothing here ever opens the database: a local fallback would be the second writer the fence
exists to stop. Standard library only (urllib), since the `coop` CLI imports this.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from engine import keyfile, loopback
from engine.errors import (
    DOMAIN_ERRORS,
    CoopError,
    KeyFileError,
    KeyFileNotPrivate,
    OwnerUnavailable,
)
from engine.owner import INVALID_OWNER, receipts
from engine.verbs import READS

CREDENTIAL_HEADER = "X-Coop-Owner-Key"
CALL_PATH = "/compat/call"
RECONCILE_PATH = "/compat/reconcile"
CLIENT_TIMEOUT_S = 30.0
CREDENTIAL_PRIVATE = "Coop credential must be private (0600)"
MAX_DETAIL_CHARS = 300


def input_digest(method: str, args: list[Any], kwargs: dict[str, Any]) -> str:
    """SHA-256 of the call's input, computed the same way by the client and the owner."""
    canonical = json.dumps(
        {"method": method, "args": args, "kwargs": kwargs},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def caller_metadata() -> dict[str, Any]:
    """Who is calling, for the owner's command log (never a secret)."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "program": Path(sys.argv[0]).name if sys.argv and sys.argv[0] else None,
        "session": os.environ.get("COOP_SESSION"),
    }


def check_owner_url(url: str) -> str:
    """The owner URL without a trailing slash; it must be plain http on a loopback host."""
    try:
        parts = urlsplit(url)
        scheme, host = parts.scheme, parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        scheme, host = "", None
    if scheme != "http" or host not in loopback.LOOPBACK_URL_HOSTS:
        raise OwnerUnavailable(
            INVALID_OWNER, detail=f"the owner URL must be http on loopback, not {url!r}"
        )
    return url.rstrip("/")


def read_credential(config: dict[str, Any]) -> str:
    """The owner credential, refused unless its file is private to this user."""
    path = Path(str(config.get("credential_file") or ""))
    try:
        return keyfile.read_private(path, "the owner credential")
    except KeyFileNotPrivate as exc:
        raise OwnerUnavailable(CREDENTIAL_PRIVATE, detail=exc.message) from exc
    except KeyFileError as exc:
        raise OwnerUnavailable(INVALID_OWNER, detail=exc.message) from exc


def _post(url: str, credential: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """One POST; returns (status, body) for any HTTP answer, raises OSError/ValueError otherwise."""
    request = urllib.request.Request(  # noqa: S310 - the URL is checked to be http on loopback
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", CREDENTIAL_HEADER: credential},
    )
    # No proxies: the owner is on loopback, and a proxy would see the credential.
    try:
        with loopback.open_url(request, CLIENT_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read()


def _detail(raw: bytes) -> str:
    try:
        detail = json.loads(raw).get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else raw.decode(errors="replace")
    return " ".join(text.split())[:MAX_DETAIL_CHARS] or "no detail"


def remote(method: str, args: list[Any], kwargs: dict[str, Any], config: dict[str, Any]) -> Any:
    """Run `method` on the owner; see the module docstring for every outcome."""
    url = check_owner_url(str(config.get("url") or "")) + CALL_PATH
    credential = read_credential(config)
    key = os.urandom(16).hex()  # 128 random bits; `uuid` would cost the CLI ~10 ms to import
    digest = input_digest(method, args, kwargs)
    # Record the key before crossing the process boundary: from here on, only the owner knows
    # whether the call committed. Do not retry a request whose HTTP outcome is uncertain.
    receipts.create(key, method, digest, str(Path(config["database"]).resolve()))
    body = {
        "method": method,
        "args": args,
        "kwargs": kwargs,
        "key": key,
        "input_sha256": digest,
        "metadata": caller_metadata(),
    }
    try:
        status, raw = _post(url, credential, body)
    except (OSError, ValueError) as exc:
        _settle_unanswered_read(method, key)
        raise OwnerUnavailable(
            f"Coop owner unavailable; no local write attempted; reconcile request {key}"
        ) from exc
    if status >= 500:
        _settle_unanswered_read(method, key)
        raise OwnerUnavailable(f"Coop owner failed (HTTP {status}); reconcile request {key}")
    if status >= 400:
        receipts.settle(key, receipts.REJECTED, "refused")
        raise OwnerUnavailable(f"Coop refused the request (HTTP {status}): {_detail(raw)}")
    try:
        answer = json.loads(raw)
        outcome = answer["outcome"]
    except (ValueError, KeyError, TypeError) as exc:
        raise OwnerUnavailable(
            f"Coop owner unavailable; no local write attempted; reconcile request {key}"
        ) from exc
    _prune_quietly()
    if outcome == "committed":
        receipts.settle(key, receipts.COMMITTED)
        return answer.get("result")
    receipts.settle(key, receipts.REJECTED, str(outcome))
    raise verdict_error(answer.get("error"), key)


def _settle_unanswered_read(method: str, key: str) -> None:
    # A read changes nothing whatever became of it: an uncertain receipt would only ask an
    # operator to reconcile a no-op (and make every failed `coop status` look like lost work).
    if method in READS:
        receipts.settle(key, receipts.REJECTED, "unanswered_read")


def verdict_error(error: Any, key: str) -> CoopError:
    """The domain error the owner reported, as the same type with the same words."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        kind = DOMAIN_ERRORS.get(str(error.get("type")), CoopError)
        return kind(error["message"])
    return OwnerUnavailable(f"Coop refused the request (HTTP 200): no verdict for request {key}")


def _prune_quietly() -> None:
    # Pruning is housekeeping: a failure here must not turn a committed call into an error.
    with contextlib.suppress(OSError):
        receipts.prune()


def reconcile(key: str, config: dict[str, Any]) -> dict[str, Any]:
    """Ask the owner what became of `key` and settle its receipt; return the owner's answer.

    The owner answers `committed`, `rejected` or `never_arrived`; for a key it never filed it
    files `never_arrived` at once, so a late copy of that request is refused rather than run.
    """
    url = check_owner_url(str(config.get("url") or "")) + RECONCILE_PATH
    credential = read_credential(config)
    try:
        status, raw = _post(url, credential, {"key": key})
    except (OSError, ValueError) as exc:
        raise OwnerUnavailable(
            f"Coop owner unavailable; reconcile request {key} again once it answers"
        ) from exc
    if status >= 500:
        raise OwnerUnavailable(
            f"Coop owner failed (HTTP {status}); reconcile request {key} again later"
        )
    if status >= 400:
        raise OwnerUnavailable(f"Coop refused the request (HTTP {status}): {_detail(raw)}")
    try:
        answer = dict(json.loads(raw))
        outcome = str(answer["outcome"])
    except (ValueError, KeyError, TypeError) as exc:
        raise OwnerUnavailable(
            f"Coop owner unavailable; reconcile request {key} again once it answers"
        ) from exc
    state = receipts.COMMITTED if outcome == "committed" else receipts.REJECTED
    answer["receipt"] = receipts.settle(key, state, outcome)
    return answer
