"""The door's report route: how `chief report` hands a cron line to a running door.

    POST /api/chief/report   body exactly {source: "cron:<job>:<fire>", text, wait_s: 0..60}

The conversation's turn lock lives in the process that holds the Chief (`chief serve`, or a host
application that mounted the door), so a cron job cannot land its line from outside: it queues
the line durably itself, then asks the holder here to land it. The route runs the door's guard
first (loopback peer, no browser or proxy header, loopback Host, the service key, the posture,
a configured owner), then `Chief.report(text, source, wait=wait_s)`: the line lands under the
turn lock, after any turn in progress, at most once per source key. Answers:

    200 {"landed": true, "chief_message_id": N, "source_key": ..}
    200 {"landed": false, "chief_message_id": null, ..}   the wait ran out; it lands when free
    401/403/503 {"detail": <guard reason>}    422 {"detail": ..} a bad source or text
    503 {"detail": "chief_unavailable"}

Only `cron:` sources are accepted here: a Coop line comes through the notify door, which also
rings Telegram; a cron line never does.
"""

from __future__ import annotations

from typing import Annotated, Protocol, runtime_checkable

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from chief.door.admit import parsed_body, refuser
from chief.door.config import DoorConfig
from chief.door.guard import Guard
from chief.door.verbs import DoorVerbs
from chief.errors import ChiefError, ChiefInputError
from plumbing.wire import MAX_TEXT_CHARS

log = structlog.get_logger("chief.door")

REPORT_PATH = "/api/chief/report"
MAX_SOURCE_CHARS = 200
MAX_WAIT_S = 60.0
MAX_BODY_BYTES = 64 * 1024


@runtime_checkable
class Reporting(Protocol):
    """What the route needs of the Chief the door holds."""

    async def report(
        self,
        text: str,
        source_id: str,
        wait: float | None = 2.0,
        source_conversation_id: str | None = None,
    ) -> int | None: ...


class ReportBody(BaseModel):
    """A cron line: its source id, its text and how long the caller waits for it to land."""

    model_config = ConfigDict(strict=True, extra="forbid")

    source: Annotated[str, Field(pattern=r"^cron:[A-Za-z0-9_.:+-]+$", max_length=MAX_SOURCE_CHARS)]
    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    wait_s: Annotated[float, Field(ge=0.0, le=MAX_WAIT_S)] = 0.0


def make_report_router(config: DoorConfig, service: DoorVerbs) -> APIRouter:
    """The report route over the door's Chief; mount it beside `make_router`."""
    refused = refuser(Guard(config, service.posture), service)
    router = APIRouter(tags=["chief reports"])

    @router.post(REPORT_PATH, include_in_schema=False)
    async def report(request: Request) -> JSONResponse:
        body = await parsed_body(request, refused, MAX_BODY_BYTES, ReportBody)
        if isinstance(body, JSONResponse):
            return body
        chief = service.chief
        if not isinstance(chief, Reporting):
            return JSONResponse({"detail": "chief_unavailable"}, status_code=503)
        try:
            message_id = await chief.report(body.text, body.source, wait=body.wait_s)
        except ChiefInputError as exc:
            return JSONResponse({"detail": exc.message}, status_code=422)
        except ChiefError as exc:
            log.error("door.chief_failed", error=str(exc), path=REPORT_PATH)
            return JSONResponse({"detail": "chief_unavailable"}, status_code=503)
        log.info("door.cron_report", source=body.source, chief_message_id=message_id)
        return JSONResponse(
            {
                "landed": message_id is not None,
                "chief_message_id": message_id,
                "source_key": "chief-report:" + body.source,
            }
        )

    return router
