"""How a door route admits a request (`router`, `report_route`, `ack_route`): the guard
first (its refusal said and counted), then the body read up to its bound (413 past it), then
parsed by its model (422 with pydantic's errors, never the input)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import structlog
from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from chief.door.guard import Guard, read_body, say_refused
from chief.door.verbs import DoorVerbs
from plumbing.loopback import on_unix_socket

log = structlog.get_logger("chief.door")

Refuser = Callable[[Request], JSONResponse | None]
M = TypeVar("M", bound=BaseModel)


def refuser(guard: Guard, service: DoorVerbs) -> Refuser:
    """The guard as a route's first step: None to go on, else the refusal to answer."""

    def refused(request: Request) -> JSONResponse | None:
        client = request.scope.get("client")
        peer = client[0] if client else None
        refusal = guard.check(
            peer,
            request.scope.get("headers", []),
            owner_configured=service.chief is not None,
            unix_socket=on_unix_socket(request.scope),
        )
        if refusal is None:
            return None
        say_refused(service.refusals, refusal.reason, path=request.url.path, peer=peer)
        return JSONResponse({"detail": refusal.reason}, status_code=refusal.status)

    return refused


def invalid(request: Request, exc: ValidationError) -> JSONResponse:
    log.warning("door.refused", reason="invalid_body", path=request.url.path)
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def too_large(request: Request) -> JSONResponse:
    log.warning("door.refused", reason="body_too_large", path=request.url.path)
    return JSONResponse({"detail": "body_too_large"}, status_code=413)


async def admitted_body(
    request: Request, refused: Refuser, body_bytes: int
) -> bytes | JSONResponse:
    """The raw body of a request the guard admits, read up to `body_bytes`; else the answer:
    the guard's refusal, or 413 for a larger body."""
    refusal = refused(request)
    if refusal is not None:
        return refusal
    raw = await read_body(request, body_bytes)
    return too_large(request) if raw is None else raw


async def parsed_body(
    request: Request, refused: Refuser, body_bytes: int, model: type[M]
) -> M | JSONResponse:
    """A request the guard admits, its body read up to `body_bytes` and parsed by `model`;
    else the answer: the guard's refusal, 413 or 422."""
    raw = await admitted_body(request, refused, body_bytes)
    if isinstance(raw, JSONResponse):
        return raw
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        return invalid(request, exc)
