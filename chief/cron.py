"""Cron reports: how a scheduled job's line reaches the Master Chief (`chief report`).

    report_from_cron(config, source_id, text, wait_s=5, door=...)

1. Durable first: the line is queued in chief_report_outbox under its key
   (`chief-report:cron:<job>:<fire>`), in its own FULL commit, before anything waits. A key that
   already landed (the same fire run again) writes nothing and answers its message id.
2. Landed under the turn lock, by whoever holds the Chief:
   - nobody (no `chief serve`, no host application: the serve lock is free): this process takes
     the serve lock, opens the Chief and lands the line itself, then lets go;
   - a running door or host application (it holds the serve lock and the conversation's turn
     lock lives in its process): the line is handed to it on the door's Unix socket
     (`POST /api/chief/report`, the door's guard and service key; the socket and its folder
     checked private to this user before the key is sent, `plumbing.unix.check_private`), and
     the door lands it under its turn lock, after any turn in progress.
3. The wait is bounded by `wait_s`, all of it: past it the call answers `queued` and the line
   lands when the Chief is free (the door's next report or its next start drains it). A door
   that is starting (lock held, socket not yet there) is asked again until the wait runs out.
4. "Busy" is said only of a busy Chief: the door answered that its wait ran out (a turn in
   progress), or another `chief report` held the Chief all along. When the holder cannot be
   handed the line, the answer is `unreachable` with the cause in its note, so the command can
   say it and fail: this process cannot knock (`DoorUnusable`: the key file is missing or
   others can read it, named with its path and mode), at once; or nothing listens at the
   socket it was told to use (named with the setting that named it, and who holds the Chief),
   once the wait has run out. The line stays queued either way.

No Telegram ring: a cron line is for the conversation only.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import anyio

from chief.config import ChiefConfig
from chief.errors import ChiefConfigError, ChiefInputError, ChiefStoreError
from chief.model import check_report_text, report_key
from plumbing.door import BASE_URL, not_running
from plumbing.unix import check_private
from plumbing.wire import MAX_TEXT_CHARS

CRON_PREFIX = "cron:"
# Job names and fire ids: what a crontab line or a timer name holds, nothing a shell or a log
# line would mangle. A fire id may carry ':' (an ISO time: --fire 2026-11-30T06:00). Matched with
# `fullmatch`, never `match` and `$`: `$` also matches before a trailing newline ('backup\n').
JOB_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
FIRE_ID = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")
DEFAULT_WAIT_S = 5.0
MAX_WAIT_S = 60.0
# While a door holds the lock but does not answer yet (it is starting), ask again this often.
DOOR_RETRY_S = 0.1
# The HTTP call may take this much longer than the wait it asks the door for.
DOOR_MARGIN_S = 2.0
REPORT_PATH = "/api/chief/report"

How = Literal["already", "landed", "queued", "refused", "unreachable"]


@dataclass(frozen=True)
class DoorAddress:
    """The running door's Unix socket, and the service key to knock with."""

    socket_path: str
    service_key: str
    key_header: str
    #: Which setting named the socket, for a person when nothing listens there
    #: (`plumbing.door.socket_origin`).
    socket_from: str = "its setting"


@dataclass(frozen=True)
class DoorUnusable:
    """Why this process cannot knock at a running door: its own settings (the key file missing,
    or others can read it), in the words that name the file and what to do."""

    reason: str


@dataclass(frozen=True)
class CronOutcome:
    """What became of a cron line: landed (here or by the door), already there, queued (it
    lands when the Chief is free), refused (queued, but the running door turned it away), or
    unreachable (queued, but the Chief's holder could not be handed it: `note` says why)."""

    how: How
    source_key: str
    message_id: int | None = None
    by: str = ""  # "this process" or "the running door"
    note: str = ""  # why a running door did not take it now, when it did not


def cron_source_id(job: str, fire: str | None) -> str:
    """`cron:<job>:<fire>`; a run without a fire id gets a fresh one (each run is its own fire).
    ChiefInputError names what is wrong."""
    source = job if job.startswith(CRON_PREFIX) else ""
    name = source.removeprefix(CRON_PREFIX)
    if not source or not JOB_NAME.fullmatch(name):
        raise ChiefInputError(
            f"--source must be cron:NAME, NAME being 1-64 letters, digits, '.', '_' or '-' "
            f"(not {job!r})"
        )
    if fire is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        fire = f"{stamp}-{uuid.uuid4().hex[:8]}"
    elif not FIRE_ID.fullmatch(fire):
        raise ChiefInputError(
            f"--fire must be 1-64 letters, digits, '.', '_', ':', '+' or '-' (not {fire!r})"
        )
    return f"{CRON_PREFIX}{name}:{fire}"


def check_cron_text(text: str) -> str:
    """The line must say something, and fit what the door carries."""
    check_report_text(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # argv carries bytes that are not UTF-8 as lone surrogates; chief.db cannot store them.
        raise ChiefInputError("report text is not valid UTF-8 — pass it as UTF-8 text") from exc
    if len(text) > MAX_TEXT_CHARS:
        raise ChiefInputError(
            f"report text is {len(text)} characters; at most {MAX_TEXT_CHARS} — shorten it"
        )
    return text


def check_wait(raw: str) -> float:
    """`--wait S`: seconds in [0, 60]."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= MAX_WAIT_S:
        raise ChiefInputError(f"--wait must be seconds in [0, {MAX_WAIT_S:g}], not {raw!r}")
    return value


async def report_from_cron(
    config: ChiefConfig,
    source_id: str,
    text: str,
    *,
    wait_s: float = DEFAULT_WAIT_S,
    door: DoorAddress | DoorUnusable | None = None,
) -> CronOutcome:
    """Queue the line durably, then have it landed under the turn lock within `wait_s`."""
    from chief.conversation import Chief
    from chief.serve_lock import REPORT_HOLDER, ServeLock
    from chief.store import ChiefStore, ReportRow

    check_cron_text(text)
    key = report_key(source_id)
    deadline = time.monotonic() + wait_s
    # Without CHIEF_OWNER the file must already name its one owner: do not create it.
    async with ChiefStore.open(config.db_path, create=config.owner is not None) as store:
        owner = config.owner or await _only_owner(store, config)
        chief_id = await store.resolve_chief(owner)
        [queued] = await store.accept_reports(chief_id, [ReportRow(key, text)])
    if queued.message_id is not None:
        return CronOutcome("already", key, queued.message_id)
    lock = ServeLock(config.db_path, holder=REPORT_HOLDER)
    unanswered = ""
    while True:
        remaining = max(deadline - time.monotonic(), 0.0)
        if _try_lock(lock):
            try:
                # Nobody else holds the Chief: open it here; its turn lock is ours alone.
                async with Chief.open(replace(config, owner=owner)) as chief:
                    message_id = await chief.report(text, source_id, wait=remaining)
            finally:
                lock.release()
            if message_id is None:
                return CronOutcome("queued", key)
            return CronOutcome("landed", key, message_id, by="this process")
        holder = _holder(lock)
        if holder is not None:  # None: another `chief report` lands its line (milliseconds)
            handed = await _hand_to_holder(holder, door, key, source_id, text, remaining)
            if isinstance(handed, CronOutcome):
                return handed
            unanswered = handed
        if time.monotonic() >= deadline:
            if unanswered:
                return CronOutcome("unreachable", key, note=unanswered)
            return CronOutcome("queued", key)
        await anyio.sleep(min(DOOR_RETRY_S, max(deadline - time.monotonic(), 0.0)))


async def _hand_to_holder(
    holder: str,
    door: DoorAddress | DoorUnusable | None,
    key: str,
    source_id: str,
    text: str,
    wait_s: float,
) -> CronOutcome | str:
    """Hand the line to the Chief's `holder` through its door: the outcome, or (nothing listens
    at the socket yet: a door that is starting) the words of why, to ask again meanwhile."""
    if not isinstance(door, DoorAddress):
        why = door.reason if door is not None else "no door address was given"
        note = f"{holder} holds the Chief and this process cannot hand it the line: {why}"
        return CronOutcome("unreachable", key, note=note)
    answer = await _ask_door(door, source_id, text, wait_s)
    if isinstance(answer, int):
        return CronOutcome("landed", key, answer, by="the running door")
    if answer == "queued":
        return CronOutcome("queued", key)
    if answer != "unreachable":
        return CronOutcome("refused", key, note=answer)
    where = not_running(door.socket_path).removeprefix("the door is not running: ")
    return f"{where} ({door.socket_from}) while {holder} holds the Chief"


def _holder(lock: Any) -> str | None:
    """Who holds the Chief, in a person's words (`chief serve` (pid 41)); None when it is
    another `chief report` landing its own line."""
    from chief.serve_lock import REPORT_HOLDER

    pid, _, what = str(lock.current_holder()).partition(" ")
    if what == REPORT_HOLDER:
        return None
    if not what or not pid.isdigit():
        return "another process"
    return f"`{what}` (pid {pid})"


def _try_lock(lock: Any) -> bool:
    try:
        return bool(lock.try_acquire())
    except OSError as exc:
        raise ChiefStoreError(f"cannot open the serve lock {lock.path}: {exc}") from exc


async def _only_owner(store: Any, config: ChiefConfig) -> str:
    owners: list[str] = await store.owners()
    if len(owners) != 1:
        raise ChiefConfigError(
            f"{config.db_path} holds {len(owners)} Master Chiefs — set CHIEF_OWNER to the owner "
            "whose conversation receives cron lines"
        )
    return owners[0]


async def _ask_door(door: DoorAddress, source_id: str, text: str, wait_s: float) -> int | str:
    """The landed message id; `queued` when the door's wait ran out; `unreachable` when nothing
    answered; otherwise the door's refusal, as `refused: <status> <detail>` (a socket that is
    not private is one: nothing was sent)."""
    import httpx

    body = {"source": source_id, "text": text, "wait_s": wait_s}
    headers = {door.key_header: door.service_key}
    try:
        # Checked before the key goes anywhere: the socket and its folder are this user's.
        check_private(door.socket_path)
    except FileNotFoundError:
        return "unreachable"
    except PermissionError as exc:
        return f"the door's socket is refused: {exc}"
    transport = httpx.AsyncHTTPTransport(uds=door.socket_path, trust_env=False)
    try:
        async with httpx.AsyncClient(
            transport=transport, timeout=wait_s + DOOR_MARGIN_S, trust_env=False
        ) as client:
            reply = await client.post(BASE_URL + REPORT_PATH, json=body, headers=headers)
    except httpx.TransportError:
        return "unreachable"
    try:
        payload = reply.json()
    except ValueError:
        payload = {}
    if reply.status_code == 200 and isinstance(payload, dict):
        message_id = payload.get("chief_message_id")
        return message_id if isinstance(message_id, int) else "queued"
    detail = payload.get("detail") if isinstance(payload, dict) else None
    return f"the running door refused it ({reply.status_code} {detail or reply.reason_phrase})"
