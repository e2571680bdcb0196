"""The door's acknowledgement route: how `chief ack N` stops an urgent report on the machine.

    POST /api/chief/urgent/ack   body exactly {report: "<number or urgent key>"}

The urgent reports ring from the process that holds the Chief (`chief serve`), so `chief ack`
hands its acknowledgement to it here, after the door's guard (loopback peer or its Unix socket,
the service key, the posture, a configured owner). The door acknowledges it as every path does
(`chief.phone.urgent.Urgent.acknowledge`, by `machine`): durably and once, every rung stopped,
each message still ringing edited, one Chief line. Answers:

    200 {"acknowledged": true, "key": .., "acked_at": ..}    stopped now
    200 {"acknowledged": false, "key": .., "acked_at": ..}   acknowledged before, at acked_at
    404 {"detail": "no_such_report"}    no urgent report has that number or key
    401/403/503 {"detail": <guard reason>}    422 {"detail": ..} a bad body
    503 {"detail": "urgent_unavailable"}   the door rings no urgent report (no Telegram)
    503 {"detail": "chief_unavailable"}    chief.db failed
"""

from __future__ import annotations

from typing import Annotated

import structlog
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from chief.door.admit import parsed_body, refuser
from chief.door.config import DoorConfig
from chief.door.guard import Guard
from chief.door.verbs import DoorVerbs
from chief.errors import ChiefError
from chief.urgent_rules import ACK_PATH, MACHINE, MAX_REFERENCE_CHARS

log = structlog.get_logger("chief.door")

MAX_BODY_BYTES = 4 * 1024


class AckBody(BaseModel):
    """An acknowledgement on the machine: the report's number, or its urgent key."""

    model_config = ConfigDict(strict=True, extra="forbid")

    report: Annotated[
        str, Field(pattern=r"^[A-Za-z0-9_.:-]+$", min_length=1, max_length=MAX_REFERENCE_CHARS)
    ]


def make_ack_router(config: DoorConfig, service: DoorVerbs) -> APIRouter:
    """The acknowledgement route over the door's urgent reports; mount it beside `make_router`."""
    refused = refuser(Guard(config, service.posture), service)
    router = APIRouter(tags=["chief urgent reports"])

    @router.post(ACK_PATH, include_in_schema=False)
    async def acknowledge(request: Request) -> JSONResponse:
        body = await parsed_body(request, refused, MAX_BODY_BYTES, AckBody)
        if isinstance(body, JSONResponse):
            return body
        urgent = service.urgent
        if urgent is None:
            return JSONResponse({"detail": "urgent_unavailable"}, status_code=503)
        try:
            key = await urgent.key_of(body.report)
            acked = None if key is None else await urgent.acknowledge(key, by=MACHINE)
        except ChiefError as exc:
            log.error("door.chief_failed", error=str(exc), path=ACK_PATH)
            return JSONResponse({"detail": "chief_unavailable"}, status_code=503)
        if key is None or acked is None:
            return JSONResponse({"detail": "no_such_report"}, status_code=404)
        log.info("door.urgent_ack_on_machine", urgent_key=key, now=acked.stopped is not None)
        return JSONResponse(
            {"acknowledged": acked.stopped is not None, "key": key, "acked_at": acked.acked_at}
        )

    return router
