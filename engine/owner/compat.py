"""The compatibility client: one call to the owner service, failing closed, with a receipt.

`engine.api` calls `remote()` when an owner file governs the database. In order:

1. the owner file's `socket` must be an absolute path, else `Invalid Coop owner configuration`;
2. the credential file must be private: any group or world bit raises
   `Coop credential must be private (0600)`;
3. the connection to the owner's Unix socket, made only through
   `plumbing.unix.connect_checked` (`engine.service_socket`): its folder and the socket this
   user's and private, the answering process this user's by the kernel's word. Until this
   holds nothing is written or sent, not even the receipt: a service that is down, or a socket
   another user could have put there, is one line saying so;
4. a fresh request key is minted and an `uncertain` receipt is written (`engine.owner.receipts`);
5. one POST to `/compat/call` with the credential, never retried: a request whose HTTP outcome
   is uncertain may already have committed, so the caller gets the key to reconcile instead.

    not running (no socket, nobody holds it)  `Coop owner unavailable: coop serve is not
                                              running (nothing listens at PATH); nothing was
                                              sent`                      no receipt
    not private (the folder, socket or peer)  `Coop owner refused: <what is wrong>`
                                                                         no receipt
    lost after the connect (a bad answer)     `Coop owner unavailable; no local write attempted;
                                              reconcile request <key>`   receipt uncertain
    5xx                                       `Coop owner failed (HTTP n); reconcile request
                                              <key>`                     receipt uncertain
      (a read, `engine.verbs.READS`, changes nothing: its receipt settles `rejected` with the
      outcome `unanswered_read` instead of waiting for a reconcile that could only say so)
    4xx without a verdict                     `Coop refused the request (HTTP n): <detail>`
                                                                         receipt rejected
    a domain verdict                          the same error type, the same words   rejected
    success                                   the result                 committed

Nothing here ever opens the database: a local fallback would be the second writer the fence
exists to stop. Standard library only (http.client through `engine.service_socket`), since the
`coop` CLI imports this.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from engine import keyfile, service_socket
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


def owner_socket(config: dict[str, Any]) -> str:
    """The owner service's socket the owner file names: an absolute path, else
    `Invalid Coop owner configuration`."""
    path = config.get("socket")
    if not isinstance(path, str) or not path.startswith("/"):
        raise OwnerUnavailable(
            INVALID_OWNER, detail=f"the owner's socket must be an absolute path, not {path!r}"
        )
    return path


def connect(config: dict[str, Any]) -> service_socket.SocketConnection:
    """A checked connection to the owner service (nothing sent yet); else `ServiceNotRunning`
    or `ServiceNotTrusted` (`OwnerUnavailable`s), each one line."""
    return service_socket.connect(owner_socket(config), CLIENT_TIMEOUT_S)


def read_credential(config: dict[str, Any]) -> str:
    """The owner credential, refused unless its file is private to this user."""
    path = Path(str(config.get("credential_file") or ""))
    try:
        return keyfile.read_private(path, "the owner credential")
    except KeyFileNotPrivate as exc:
        raise OwnerUnavailable(CREDENTIAL_PRIVATE, detail=exc.message) from exc
    except KeyFileError as exc:
        raise OwnerUnavailable(INVALID_OWNER, detail=exc.message) from exc


def _post(
    connection: service_socket.SocketConnection, target: str, credential: str, body: object
) -> tuple[int, bytes]:
    """One POST on the checked connection; (status, body) for any HTTP answer, raises
    OSError/ValueError otherwise (`http.client.HTTPException`, an answer that is not HTTP, as a
    ValueError)."""
    headers = {"Content-Type": "application/json", CREDENTIAL_HEADER: credential}
    try:
        return service_socket.exchange(
            connection, "POST", target, json.dumps(body).encode(), headers
        )
    except http.client.HTTPException as exc:
        raise ValueError(f"the owner's answer is not HTTP: {exc!r}") from exc


def _detail(raw: bytes) -> str:
    try:
        detail = json.loads(raw).get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else raw.decode(errors="replace")
    return " ".join(text.split())[:MAX_DETAIL_CHARS] or "no detail"


def remote(method: str, args: list[Any], kwargs: dict[str, Any], config: dict[str, Any]) -> Any:
    """Run `method` on the owner; see the module docstring for every outcome."""
    credential = read_credential(config)
    connection = connect(config)
    try:
        return _call(connection, method, args, kwargs, config, credential)
    finally:
        connection.close()


def _call(
    connection: service_socket.SocketConnection,
    method: str,
    args: list[Any],
    kwargs: dict[str, Any],
    config: dict[str, Any],
    credential: str,
) -> Any:
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
        status, raw = _post(connection, CALL_PATH, credential, body)
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
    credential = read_credential(config)
    connection = connect(config)
    try:
        status, raw = _post(connection, RECONCILE_PATH, credential, {"key": key})
    except (OSError, ValueError) as exc:
        raise OwnerUnavailable(
            f"Coop owner unavailable; reconcile request {key} again once it answers"
        ) from exc
    finally:
        connection.close()
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
