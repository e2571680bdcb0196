"""The door's HTTP surface: a FastAPI router a host application mounts, or `chief serve` runs.

    POST /api/coop/engine/notify   body exactly {text: 1..4000, kind, outbox_id?} and, with an
                                   outbox_id, the optional extras (issue 21): ask {request_id,
                                   key: q-<32 hex>, title, choices: 0..4 labels, and (issue
                                   28) deadline_at, default, remind {every_s, max}}, settles
                                   {request_id, key, and by: "deadline", outcome, choice},
                                   ring, urgent (issue 28: true rings it loud until
                                   acknowledged, chief.phone.urgent), amends {request_id,
                                   key} (issue 34: a settled ask's outcome amended, its
                                   message edited)
    POST /api/coop/engine/notify-batch
                                   body exactly {items: [{text, kind, outbox_id}, ...]}: 1 to
                                   CHIEF_NOTIFY_BATCH_MAX (64) rows, each as strict as a notify
                                   body but with its outbox_id required, no outbox_id twice
    GET  /api/coop/engine/status   undelivered reports, sent count, posture, Telegram and its
                                   queue (depth, oldest age, last error, next attempt), uptime

Both run the guard first, on the raw peer and headers, before the body is read: an
unauthenticated caller learns 401/403 and nothing about the body's shape. The body is then
validated strictly (422 for any other field, a missing one, a wrong type, a text over 4,000
characters, a malformed extra: a choice over 24 characters or with a comma or a control
character, two choices alike ignoring case, more than 4, a request id below 1, an ask key not
`q-` and 32 hex digits (or a settles naming an id alone), an extra set to null or sent without
an outbox_id; each error located, e.g. ["ask", "choices", 0]). Answers:

    200 {"delivered": true, "channel": "telegram", "outbox_id": .., "chief_message_id": ..,
         "telegram": "sent" | "queued" | "not_configured" | "not_rung",
         "telegram_message_id": ..}   ("not_rung": `ring: false`, or an ask settled before
        it rang)
        (+ "already_sent": true when this row had already rung). Accepted = the Chief line
        landed or queued and the Telegram entry queued, in one chief.db transaction.
    401/403/503 {"detail": <guard reason>}        422 {"detail": [validation errors]}
    413 {"detail": "body_too_large"}   past CHIEF_NOTIFY_BODY_MAX_BYTES when set, else past
        MAX_BODY_BYTES (a notify) or ~64 kB a row (a batch)
    503 {"detail": "notification_channel_unavailable"}  only a notify the door cannot queue:
        no outbox id (Telegram alone) and Telegram not configured
    503 {"detail": "chief_unavailable"}  chief.db could not take the report or the entry

The batch route checks the envelope first, as a whole: the guard, the body's size (413),
then exactly {"items": [...]} with 1 to CHIEF_NOTIFY_BATCH_MAX rows (422: its message names
CHIEF_NOTIFY_BATCH_MAX and the limit, "a batch carries at most N rows"; the notifier reads N back
from those words). Past that, each item is judged on its own, in body order, as strictly as a
notify body (its outbox_id required, and not twice in one batch), and answered on its own:

    200 {"items": [<one answer per item, in body order>]}
        accepted  what the single route answers for that row (+ "already_sent": true)
        refused   {"delivered": false, "outbox_id": .. | null, "refused": 422,
                   "detail": [validation errors, their "loc" inside the item]}
        held      {"delivered": false, "outbox_id": .. | null, "held": true}

The items before the first refused one are accepted, all of them in ONE chief.db transaction
(a 503 chief_unavailable then means none was recorded and the batch may be sent again). The
first refused item keeps the owner's order: the items behind it are held, neither judged nor
recorded, for the sender to send again once the refused row is dealt with. An `outbox_id` is
echoed only when it is one the door could accept (else null); the notifier matches answers to
its rows by position. The guard and its answers are the single route's.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import structlog
from fastapi import APIRouter, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from chief.door.admit import Refuser, admitted_body, invalid, refuser
from chief.door.config import DoorConfig
from chief.door.guard import Guard
from chief.door.verbs import DoorVerbs
from chief.errors import ChannelUnavailable, ChiefUnavailable
from chief.model import (
    ASK_KEY_PATTERN,
    MAX_CHOICE_CHARS,
    MAX_CHOICES,
    NO_EXTRAS,
    Amend,
    Ask,
    Extras,
    Remind,
    Settle,
    choice_refusal,
    choices_refusal,
)
from chief.urgent_rules import marked
from plumbing.bounds import MAX_REMIND_MAX, MAX_WAIT_S, MIN_REMIND_S
from plumbing.wire import (
    MAX_TEXT_CHARS,
    NOTIFY_BATCH_PATH,
    NOTIFY_PATH,
    SERVICE_KEY_HEADER,
    STATUS_PATH,
)

log = structlog.get_logger("chief.door")

MAX_KIND_CHARS = 100
# Report source ids are at most 200 characters, 12 of them "coop-notify:".
MAX_OUTBOX_ID_CHARS = 128
# A valid body is at most ~50 kB (4,000 characters, each escaped as a surrogate pair); a larger
# one is refused before it is parsed so a caller cannot make the door buffer without bound.
MAX_BODY_BYTES = 1024 * 1024
# A batch row is at most ~50 kB for the same reason; a batch body may take this much per row.
MAX_BATCH_ROW_BYTES = 64 * 1024


def _encodable(value: str) -> str:
    # JSON can carry lone surrogates ("\ud800") that no database or Telegram can store.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from exc
    return value


def _has_content(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain something other than whitespace")
    return value


def _choice(value: str) -> str:
    refusal = choice_refusal(value)
    if refusal is not None:
        raise ValueError(refusal)
    return value


def _distinct(values: list[str]) -> list[str]:
    refusal = choices_refusal(values)
    if refusal is not None:
        raise ValueError(refusal)
    return values


def _given(value: object) -> object:
    # An extra is sent only when the row has it (the notifier sends it or leaves it out), so
    # an explicit null is a malformed body; a default is never validated, so absent passes.
    if value is None:
        raise ValueError("leave the field out instead of null")
    return value


def _absent_by_default(schema: dict[str, Any]) -> None:
    """An extra's schema as the door takes it: no null, no default (absent)."""
    schema.pop("default", None)
    branches = [branch for branch in schema.pop("anyOf", []) if branch != {"type": "null"}]
    if len(branches) == 1:
        schema.update(branches[0])


# The latest instant a datetime can show (9999-12-31): a deadline past it could not be said.
MAX_EPOCH_S = 253_402_300_799.0
# SQLite's INTEGER: a request id past it could not be stored.
RequestId = Annotated[int, Field(ge=1, le=2**63 - 1)]
AskKey = Annotated[str, Field(pattern=ASK_KEY_PATTERN)]
Choice = Annotated[
    str,
    Field(min_length=1, max_length=MAX_CHOICE_CHARS),
    AfterValidator(_encodable),
    AfterValidator(_choice),
]


# Issue 28: a deadline in epoch seconds (finite, after 1970, within SQLite's REAL and a
# datetime), and the reminders' interval and count.
EpochSeconds = Annotated[float, Field(gt=0, le=MAX_EPOCH_S, allow_inf_nan=False)]


class RemindBody(BaseModel):
    """The ask's `remind`: ring it again every `every_s` seconds while it is open, at most `max`
    times; both within the engine's bounds (`plumbing.bounds`), held here where they enter."""

    model_config = ConfigDict(strict=True, extra="forbid")

    every_s: Annotated[float, Field(ge=MIN_REMIND_S, le=MAX_WAIT_S, allow_inf_nan=False)]
    max: Annotated[int, Field(ge=1, le=MAX_REMIND_MAX)]


class AskBody(BaseModel):
    """The `ask` extra: this row files request `request_id` to the owner; one button per choice
    (0 to 4 of them; none: a text reply answers it)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    request_id: RequestId
    key: AskKey
    title: Annotated[
        str, Field(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(_encodable)
    ]
    choices: Annotated[list[Choice], Field(max_length=MAX_CHOICES), AfterValidator(_distinct)] = (
        Field(default_factory=list)
    )
    # Issue 28: the deadline, its default (one of the choices; absent: the deadline abandons
    # it) and the reminders. Absent when unset, never null (`_given`).
    deadline_at: Annotated[EpochSeconds | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    default: Annotated[Choice | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    remind: Annotated[RemindBody | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )

    def ask(self) -> Ask:
        """The ask as the Chief takes it."""
        remind = None if self.remind is None else Remind(self.remind.every_s, self.remind.max)
        choices = tuple(self.choices)
        return Ask(
            self.request_id, self.key, self.title, choices, self.deadline_at, self.default, remind
        )

    @field_validator("deadline_at")
    @classmethod
    def _within_the_engines_wait(cls, value: float | None) -> float | None:
        # The engine files a deadline at most MAX_WAIT_S ahead of the moment it files it, and
        # the door sees the row no earlier: one further ahead was never filed by the engine.
        if value is not None and value > time.time() + MAX_WAIT_S:
            raise ValueError(f"deadline_at is more than {MAX_WAIT_S} s (a year and a day) ahead")
        return value

    @field_validator("default")
    @classmethod
    def _a_choice_with_a_deadline(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if info.data.get("deadline_at") is None:
            raise ValueError("default is sent only with deadline_at")
        if value not in info.data.get("choices", []):
            raise ValueError("default must be one of the choices")
        return value


class SettlesBody(BaseModel):
    """The `settles` extra: this row reports the ask `key` (request `request_id`) closed or
    abandoned. The key, not the id, names the ask: ids come back, keys never do. Issue 28:
    when its deadline decided it, `by: "deadline"` with `outcome` (closed, with the default as
    `choice`, or abandoned)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    request_id: RequestId
    key: AskKey
    by: Annotated[Literal["deadline"] | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    outcome: Annotated[Literal["closed", "abandoned"] | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    choice: Annotated[Choice | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )

    @field_validator("outcome")
    @classmethod
    def _outcome_by_the_deadline(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("by") is None:
            raise ValueError('outcome is sent only with by: "deadline"')
        return value

    @field_validator("choice")
    @classmethod
    def _choice_of_a_close(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("outcome") != "closed":
            raise ValueError('choice is sent only with outcome: "closed"')
        return value

    @model_validator(mode="after")
    def _by_with_its_outcome(self) -> SettlesBody:
        if self.by is not None and self.outcome is None:
            raise ValueError('by: "deadline" is sent with its outcome')
        return self


class AmendsBody(BaseModel):
    """The `amends` extra (issue 34): this row reports the settled ask `key` (request
    `request_id`) amended, in its text; the door edits the ask's message to show it."""

    model_config = ConfigDict(strict=True, extra="forbid")

    request_id: RequestId
    key: AskKey


class NotifyBody(BaseModel):
    """One line for the owner: `text` to read, its `kind`, and the engine's `outbox_id`; the
    optional extras (issue 21) with an outbox_id only: `ask` (ring it alone, with buttons),
    `settles` (the ask with that key is settled: void its buttons, edit its message) and `ring`
    (false: the Chief line only)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    text: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TEXT_CHARS),
        AfterValidator(_encodable),
        AfterValidator(_has_content),
    ]
    kind: Annotated[
        str,
        Field(min_length=1, max_length=MAX_KIND_CHARS),
        AfterValidator(_encodable),
        AfterValidator(_has_content),
    ]
    outbox_id: Annotated[
        str | None,
        Field(pattern=r"^[A-Za-z0-9_.:-]+$", min_length=1, max_length=MAX_OUTBOX_ID_CHARS),
    ] = None
    # Absent is None; an explicit null is refused (`_given`), and the schema offers no null.
    ask: Annotated[AskBody | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    settles: Annotated[SettlesBody | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    ring: Annotated[bool | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    # Issue 28: ring it loud until acknowledged (chief.urgent_rules); absent: an ordinary report.
    urgent: Annotated[bool | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )
    # Issue 34: a settled ask's outcome amended: its message edited to show the row's text.
    amends: Annotated[AmendsBody | None, AfterValidator(_given)] = Field(
        default=None, json_schema_extra=_absent_by_default
    )

    @field_validator("ask", "settles", "ring", "urgent", "amends")
    @classmethod
    def _with_an_outbox_id(cls, value: object, info: ValidationInfo) -> object:
        # Only a row of the engine's outbox carries extras: a settle or a silent line is kept
        # by its delivery key, and a notify without one has no Chief line to land.
        if "outbox_id" in info.data and info.data["outbox_id"] is None:
            raise ValueError(f"{info.field_name} is sent only with an outbox_id")
        return value

    def line(self) -> str:
        """The text to land and ring: an urgent row's marked `URGENT: `."""
        return marked(self.text, MAX_TEXT_CHARS) if self.urgent else self.text

    def extras(self) -> Extras:
        """The extras as the Chief takes them."""
        body, settles, ring, amends = self.ask, self.settles, self.ring, self.amends
        if (body, settles, ring, amends) == (None, None, None, None) and not self.urgent:
            return NO_EXTRAS
        ask = None if body is None else body.ask()
        settle = None
        if settles is not None:
            by, outcome, choice = settles.by, settles.outcome, settles.choice
            settle = Settle(settles.request_id, settles.key, by, outcome, choice)
        amend = None if amends is None else Amend(amends.request_id, amends.key)
        return Extras(ask, settle, ring is not False, urgent=self.urgent is True, amends=amend)


OutboxId = Annotated[
    str, Field(pattern=r"^[A-Za-z0-9_.:-]+$", min_length=1, max_length=MAX_OUTBOX_ID_CHARS)
]


class NotifyItem(NotifyBody):
    """One row of a notify batch: a notify body whose `outbox_id` is required."""

    outbox_id: OutboxId


def _within_batch_limit(value: object, info: ValidationInfo) -> object:
    # Checked before any row is validated, so an oversized batch costs no per-row work. The
    # notifier reads the limit back from these words ("at most N rows (CHIEF_NOTIFY_BATCH_MAX)",
    # notifier.outcome `door_batch_limit`, its twin, pinned in tests/contract) and sends batches
    # of N from then on.
    limit = (info.context or {}).get("batch_max")
    if isinstance(value, list) and limit is not None and len(value) > limit:
        raise ValueError(
            f"a batch carries at most {limit} rows (CHIEF_NOTIFY_BATCH_MAX), this one "
            f"{len(value)}: send it as several batches"
        )
    return value


def _distinct_outbox_ids(items: list[NotifyItem]) -> list[NotifyItem]:
    seen: set[str] = set()
    for item in items:
        if item.outbox_id in seen:
            raise ValueError(f"outbox_id {item.outbox_id!r} appears twice in the batch")
        seen.add(item.outbox_id)
    return items


class NotifyBatchBody(BaseModel):
    """Rows for the owner, each a `NotifyItem`, in the order they are to be accepted: the whole
    body valid, the batch route's fast path (one validation in pydantic's core)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    items: Annotated[
        list[NotifyItem],
        Field(min_length=1),
        BeforeValidator(_within_batch_limit),
        AfterValidator(_distinct_outbox_ids),
    ]


class BatchEnvelope(BaseModel):
    """The batch body's envelope alone, `{"items": [1 to CHIEF_NOTIFY_BATCH_MAX anythings]}`:
    what is checked of a batch as a whole before each item is judged on its own."""

    model_config = ConfigDict(strict=True, extra="forbid")

    items: Annotated[list[Any], Field(min_length=1), BeforeValidator(_within_batch_limit)]


class NotifyAnswer(BaseModel):
    delivered: bool
    channel: str
    outbox_id: str | None
    chief_message_id: int | None
    telegram: Literal["sent", "queued", "not_configured", "not_rung"]
    telegram_message_id: int | None = None
    already_sent: bool = False


class RefusedItemAnswer(BaseModel):
    """A batch item the door refused: `refused` is the status the single route would answer
    for it (422), `detail` its validation errors, their `loc` inside the item."""

    delivered: Literal[False]
    outbox_id: str | None
    refused: int
    detail: list[dict[str, Any]]


class HeldItemAnswer(BaseModel):
    """A batch item behind a refused one: not judged, not recorded; send it again."""

    delivered: Literal[False]
    outbox_id: str | None
    held: Literal[True]


class NotifyBatchAnswer(BaseModel):
    items: list[NotifyAnswer | RefusedItemAnswer | HeldItemAnswer]


class TelegramRefusalAnswer(BaseModel):
    """Telegram refuses the bot or the chat until a person acts."""

    kind: Literal["bad_token", "chat_not_found", "chat_migrated", "bot_blocked", "forbidden"]
    answer: str  # Telegram's answer: "401 Unauthorized", "403 Forbidden: bot was blocked ..."
    action: str  # what a person does about it


class TelegramQueueAnswer(BaseModel):
    depth: int
    oldest_age_s: float | None
    last_error: str | None
    next_attempt_in_s: float | None
    unmarked_sends: int
    messages_sent: int
    refusal: TelegramRefusalAnswer | None = None
    sending_s: float | None = None
    send_slow: bool = False
    in_doubt_events: int = 0


class QuietHoursAnswer(BaseModel):
    """TELEGRAM_QUIET_HOURS: messages go out silently inside the window."""

    window: str  # "23:00-07:00"
    zone: str  # an IANA name, or "local time"
    in_force: bool  # whether the window holds now


class ChatMovedAnswer(BaseModel):
    """Telegram made the door's group a supergroup (`migrate_to_chat_id`); the door rings it."""

    from_: str = Field(alias="from")  # the group's id, as configured
    to: str  # the supergroup's id, rung now
    action: str  # what a person does so a restart keeps it ("": the pairing names it)


class StatusAnswer(BaseModel):
    undelivered_reports: int
    sent_count: int
    posture: str
    telegram_configured: bool
    #: set when a token is and no chat is: what to do before Telegram rings
    telegram_next_step: str | None = None
    uptime_s: float
    notify_locks: int
    notify_in_flight: int
    telegram_queue: TelegramQueueAnswer
    telegram_quiet_hours: QuietHoursAnswer | None = None
    telegram_chat_moved: ChatMovedAnswer | None = None
    #: the phone's poll refused 409 (another reader, a webhook), while it lasts
    telegram_poll_conflict: str | None = None


class Detail(BaseModel):
    detail: str


_KEY_PARAMETER = {
    "name": SERVICE_KEY_HEADER,
    "in": "header",
    "required": True,
    "schema": {"type": "string"},
    "description": "the shared service key (its file is mode 0600)",
}
_REFUSALS: dict[int | str, dict[str, Any]] = {
    401: {"model": Detail, "description": "service key missing or wrong"},
    403: {"model": Detail, "description": "peer, header, Host or posture refused"},
    413: {"model": Detail, "description": "body larger than the door reads"},
    503: {"model": Detail, "description": "posture, owner, Chief or Telegram unavailable"},
}


Endpoint = Callable[[Request], Awaitable[JSONResponse]]


def make_router(config: DoorConfig, service: DoorVerbs) -> APIRouter:
    """The door's routes over `service`; mount with `app.include_router(...)`."""
    refused = refuser(Guard(config, service.posture), service)
    router = APIRouter(tags=["coop engine door"])
    router.add_api_route(
        NOTIFY_PATH,
        _notify_endpoint(refused, service, config.notify_body_max_bytes or MAX_BODY_BYTES),
        methods=["POST"],
        response_model=NotifyAnswer,
        responses={
            **_REFUSALS,
            422: {"description": "the body is not exactly {text, kind, outbox_id?}"},
        },
        openapi_extra=_openapi_body(inline_schema(NotifyBody.model_json_schema())),
    )
    router.add_api_route(
        NOTIFY_BATCH_PATH,
        _notify_batch_endpoint(refused, service, config),
        methods=["POST"],
        response_model=NotifyBatchAnswer,
        responses={
            **_REFUSALS,
            422: {"description": "the body is not exactly {items: [{text, kind, outbox_id}]}"},
        },
        openapi_extra=_openapi_body(_batch_schema(config.notify_batch_max)),
    )
    router.add_api_route(
        STATUS_PATH,
        _status_endpoint(refused, service),
        methods=["GET"],
        response_model=StatusAnswer,
        responses=_REFUSALS,
        openapi_extra={"parameters": [_KEY_PARAMETER]},
    )
    return router


def _openapi_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "parameters": [_KEY_PARAMETER],
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}},
    }


def _notify_endpoint(refused: Refuser, service: DoorVerbs, body_bytes: int) -> Endpoint:
    async def notify(request: Request) -> JSONResponse:
        """Land a line in the Master Chief and queue its Telegram ring, once per outbox row."""
        raw = await admitted_body(request, refused, body_bytes)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            body = NotifyBody.model_validate_json(raw)
        except ValidationError as exc:
            return invalid(request, exc)
        try:
            answer = await service.notify(body.line(), body.kind, body.outbox_id, body.extras())
        except ChannelUnavailable as exc:
            headers = {}
            if exc.retry_after_s is not None:
                headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
            return JSONResponse(
                {"detail": "notification_channel_unavailable"}, status_code=503, headers=headers
            )
        except ChiefUnavailable:
            return JSONResponse({"detail": "chief_unavailable"}, status_code=503)
        return JSONResponse(answer)

    return notify


def _notify_batch_endpoint(refused: Refuser, service: DoorVerbs, config: DoorConfig) -> Endpoint:
    batch_max = config.notify_batch_max
    body_bytes = config.notify_body_max_bytes or max(
        MAX_BODY_BYTES, batch_max * MAX_BATCH_ROW_BYTES
    )

    async def notify_batch(request: Request) -> JSONResponse:
        """Each item judged on its own; the items before the first refused one accepted in one
        chief.db transaction; one answer per item, in body order."""
        raw = await admitted_body(request, refused, body_bytes)
        if isinstance(raw, JSONResponse):
            return raw
        try:
            accepted, rest = judge_batch(raw, batch_max)
        except ValidationError as exc:
            return invalid(request, exc)
        if rest:
            log.warning(
                "door.refused",
                reason="invalid_item",
                path=request.url.path,
                delivery_key=rest[0]["outbox_id"],
                detail=rest[0]["detail"],
                accepted=len(accepted),
                held=len(rest) - 1,
            )
        answers: list[dict[str, Any]] = []
        if accepted:
            try:
                answers = await service.notify_batch(
                    [(item.line(), item.kind, item.outbox_id, item.extras()) for item in accepted]
                )
            except ChiefUnavailable:
                return JSONResponse({"detail": "chief_unavailable"}, status_code=503)
        return JSONResponse({"items": answers + rest})

    return notify_batch


def judge_batch(raw: bytes, batch_max: int) -> tuple[list[NotifyItem], list[dict[str, Any]]]:
    """A batch body judged item by item: (the items to accept, in order; the answers of the
    rest: the first refused item's, then one `held` per item behind it). Raises
    `ValidationError` when the envelope is wrong (the whole batch is refused).

    The fast path is one strict validation of the whole body; only a body that fails it is
    parsed again and judged one item at a time (a valid batch costs what it always did)."""
    context = {"batch_max": batch_max}
    try:
        return NotifyBatchBody.model_validate_json(raw, context=context).items, []
    except ValidationError as whole:
        try:
            # The standard parser, not pydantic's: it reads a lone surrogate ("\ud800") as
            # text, so that item alone is refused (pydantic refuses the whole document).
            parsed = json.loads(raw)
        except (ValueError, RecursionError):
            raise whole from None
    envelope = BatchEnvelope.model_validate(parsed, context=context)
    return _judge_items(envelope.items)


def _judge_items(items: list[Any]) -> tuple[list[NotifyItem], list[dict[str, Any]]]:
    accepted: list[NotifyItem] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        try:
            row = NotifyItem.model_validate(item)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            return accepted, _refused_and_held(items[index:], jsonable_encoder(errors))
        if row.outbox_id in seen:
            twice = f"outbox_id {row.outbox_id!r} appears twice in the batch"
            error = {"type": "value_error", "loc": ["outbox_id"], "msg": twice}
            return accepted, _refused_and_held(items[index:], [error])
        seen.add(row.outbox_id)
        accepted.append(row)
    return accepted, []


def _refused_and_held(items: list[Any], errors: list[Any]) -> list[dict[str, Any]]:
    """The answers from the first refused item on: its refusal, then the items held behind it."""
    first, *behind = items
    refusal = {"delivered": False, "outbox_id": _echoed_id(first), "refused": 422}
    return [
        refusal | {"detail": errors},
        *({"delivered": False, "outbox_id": _echoed_id(item), "held": True} for item in behind),
    ]


# The very check an accepted item's outbox_id passes (`OutboxId`), so an echo is never looser.
_OUTBOX_ID = TypeAdapter(OutboxId, config=ConfigDict(strict=True))


def _echoed_id(item: object) -> str | None:
    """An item's outbox_id when it is one the door could have accepted, else None (the answer
    never echoes arbitrary input)."""
    outbox_id = item.get("outbox_id") if isinstance(item, dict) else None
    try:
        return _OUTBOX_ID.validate_python(outbox_id)
    except ValidationError:
        return None


def _status_endpoint(refused: Refuser, service: DoorVerbs) -> Endpoint:
    async def status(request: Request) -> JSONResponse:
        """What an operator asks the door: undelivered reports, sent count, posture, uptime."""
        refusal = refused(request)
        if refusal is not None:
            return refusal
        try:
            return JSONResponse(await service.status())
        except ChiefUnavailable:
            return JSONResponse({"detail": "chief_unavailable"}, status_code=503)

    return status


def inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` written in where they are referred to: a body schema set into
    the OpenAPI document cannot keep `#/$defs/...` references, which would point at the
    document's root."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [inline(value) for value in node]
        return node

    result: dict[str, Any] = inline(schema)
    return result


def _batch_schema(batch_max: int) -> dict[str, Any]:
    """The batch body's JSON schema, inline (no $refs), with this door's row limit."""
    return {
        "title": "NotifyBatchBody",
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": inline_schema(NotifyItem.model_json_schema()),
                "minItems": 1,
                "maxItems": batch_max,
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    }
