"""The phone's routes on the engine service (`coop serve`): the reverse of the notify door.
The Chief's door relays the owner's answers from Telegram here, and asks here for `/status`.

    POST /api/coop/phone/answer   {"answer_key": "a-<32 hex>", "request_id": N,
                                   "ask_key": "q-<32 hex>",          (the question's own key)
                                   "choice": LABEL | "text": TEXT}   (exactly one of the two)
                                  -> 200 {"outcome", "detail", "request": {...} | null}
    GET  /api/coop/phone/summary  -> 200 {"owner", "todos", "requests", "oldest", "outbox"}

The guard, in order, before the body is read: the owner app's loopback guard
(`engine.owner.app.guard_request`: loopback peer, no browser or proxy header, one loopback
Host; 403), then `X-Coop-Service-Key`, compared in constant time (SHA-256 digests,
`hmac.compare_digest`) with the key in `COOP_SERVICE_KEY_FILE` (the notifier's key for the
door, read once at start; only its digest is kept): missing 401, wrong 403, no usable key
file at start 503.

Where it runs is decided per request from the owner file, as the compat routes decide it: in
local mode the route opens the ledger itself (a fenced ledger without an owner file refuses it,
as it refuses every local writer); after `coop cutover` it runs on the owner's connection under
its lock. An answer is one transaction (`engine.verbs.phone.answer_request`); once it commits,
the in-process notifier is kicked. A database failure answers 503 (the door asks again with
the same answer key, which applies once). Outcomes travel in a 200 answer, never as an error.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import structlog
from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine import door, lifecycle
from engine.errors import CoopError, GuardRefused, KeyFileError, StoreError, UsageError
from engine.verbs import phone as phone_verbs
from plumbing.wire import SERVICE_KEY_HEADER

PREFIX = "/api/coop/phone"
ANSWER_PATH = PREFIX + "/answer"
SUMMARY_PATH = PREFIX + "/summary"
ANSWER_KEY_PATTERN = r"^a-[0-9a-f]{32}$"
ASK_KEY_PATTERN = r"^q-[0-9a-f]{32}$"
SQLITE_INTEGER_MAX = 2**63 - 1
#: A choice longer than any label is still answered (`not_a_choice`), up to this bound.
MAX_CHOICE_FIELD_CHARS = 256

log = structlog.get_logger("engine.phone")


class AnswerBody(BaseModel):
    """One answer from the phone: a button's label or a reply's text, never both."""

    model_config = ConfigDict(extra="forbid", strict=True)

    answer_key: str = Field(pattern=ANSWER_KEY_PATTERN)
    request_id: int = Field(ge=1, le=SQLITE_INTEGER_MAX)
    ask_key: str = Field(pattern=ASK_KEY_PATTERN)
    choice: str | None = Field(default=None, min_length=1, max_length=MAX_CHOICE_FIELD_CHARS)
    text: str | None = Field(default=None, min_length=1, max_length=lifecycle.MAX_ANSWER_CHARS)

    @model_validator(mode="after")
    def _one_of_choice_or_text(self) -> AnswerBody:
        if (self.choice is None) == (self.text is None):
            raise ValueError("give exactly one of choice and text")
        return self


class ServiceKey:
    """The digest of the service key, read once at start; None with the reason when unusable."""

    def __init__(self, digest: bytes | None, problem: str | None = None) -> None:
        self.digest = digest
        self.problem = problem

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServiceKey:
        """`COOP_SERVICE_KEY_FILE` (default `<COOP_HOME>/service.key`), through the engine's one
        key reader (refused unless 0600)."""
        try:
            key = door.read_service_key(os.environ if environ is None else environ)
        except KeyFileError as exc:
            log.warning("phone.service_key_unusable", error=exc.message)
            return cls(None, exc.message)
        return cls(_digest(key))

    def check(self, given: str | None) -> None:
        if self.digest is None:
            raise _deny(503, "service_key_file", f"the service key is unusable: {self.problem}")
        if not given:
            raise _deny(401, "service_key", f"missing {SERVICE_KEY_HEADER}")
        if not hmac.compare_digest(_digest(given), self.digest):
            raise _deny(403, "service_key", f"wrong {SERVICE_KEY_HEADER}")


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _deny(status: int, reason: str, detail: str) -> GuardRefused:
    """The key check's refusal: counted and summed up by the owner app's guard
    (`engine.owner.app.GuardBeforeBody`), not one line each."""
    return GuardRefused(detail, status=status, reason=reason, event="phone.refused")


def _refuse(status: int, reason: str, detail: str) -> HTTPException:
    log.warning("phone.refused", reason=reason, status=status)
    return HTTPException(status_code=status, detail=detail)


#: Runs one use case where the owner file says (`engine.owner.app.Owner.run_phone`):
#: (the use case, whether it writes) -> its answer.
Runner = Callable[[Callable[..., Any], bool], Any]


def guard(key: ServiceKey) -> Callable[[Request], None]:
    """The phone's own check, after the owner app's loopback guard: the service key. The owner
    app runs it on the headers, before the body is read (`engine.owner.app.GuardBeforeBody`)."""

    def check(request: Request) -> None:
        key.check(request.headers.get(SERVICE_KEY_HEADER))

    return check


def make_router(run: Runner, kick: Callable[[], None] | None = None) -> APIRouter:
    """The phone's routes; the owner app guards them (`guard`) before they run."""
    router = APIRouter(prefix=PREFIX)

    @router.post("/answer")
    async def answer(body: AnswerBody) -> dict[str, Any]:
        bound = log.bind(answer_key=body.answer_key, request_id=body.request_id)

        def use_case(unit: Any) -> Any:
            return phone_verbs.answer_request(
                unit,
                body.request_id,
                answer_key=body.answer_key,
                ask_key=body.ask_key,
                choice=body.choice,
                text=body.text,
            )

        found = await _run(run, use_case, writing=True, bound=bound)
        bound.info("phone.answer", outcome=found["outcome"], replayed=found["replayed"])
        if kick is not None and found["outcome"] == phone_verbs.CLOSED:
            # Also on a replay: a service killed between the commit and its kick woke nobody.
            kick()
        return {key: found[key] for key in ("outcome", "detail", "request")}

    @router.get("/summary")
    async def summary() -> dict[str, Any]:
        found: dict[str, Any] = await _run(run, phone_verbs.phone_summary, writing=False, bound=log)
        return found

    return router


async def _run(
    run: Runner, use_case: Callable[..., Any], *, writing: bool, bound: Any
) -> dict[str, Any]:
    """One use case in a worker thread; the engine's errors as HTTP answers."""
    try:
        found: dict[str, Any] = await anyio.to_thread.run_sync(run, use_case, writing)
    except StoreError as exc:
        # Nothing was filed: the door asks again with the same key, which applies once.
        bound.error("phone.store_failed", error=exc.message)
        raise _refuse(503, "store", exc.message) from exc
    except UsageError as exc:
        raise _refuse(422, "usage", exc.message) from exc
    except CoopError as exc:  # an owner file that cannot be read: fail closed
        bound.error("phone.unavailable", error=exc.message)
        raise _refuse(503, "owner", exc.message) from exc
    return found
