"""The door's verbs: `notify` (Master Chief first, then Telegram once per outbox row) and `status`.

    notify(text, kind, outbox_id):
      with an outbox id:  report(text, "coop-notify:<id>", wait=REPORT_WAIT_S)  -- keyed, durable
                            (the same thread hop reads whether the row was marked sent)
                          under the row's lock: sent already? -> already_sent, ring nothing
                                                else send to Telegram, then mark the row sent
      without one:        Telegram alone (nothing to deduplicate by)

The keyed, durable step runs first and the unkeyed one (Telegram has no idempotency key) once,
so a failed send and its retries never duplicate the Chief line. The report's wait is bounded
and sits outside the row lock: a busy Chief held the request open past the engine's timeout
once, every retry added a waiter, and each rang the phone when the Chief came free.

The sent flag read with the report is used under the lock only if no mark was written since
it was read (a door-wide count of marks); otherwise it is read again there, so a concurrent
retry of the same row that rang meanwhile is seen. One row at a time, that saves a hop per row.

A mark that fails (a full disk) is kept in `unmarked` and written before the next answer for
that row, which rings nothing. The one window left: a crash after Telegram accepted and before
the mark rings again on the engine's next retry (at-least-once, deduplicated per destination).
The fault points `door.after_report` and `door.after_telegram_send` let the crash tests measure
it.

Errors (both `DoorError`, both answered 503 by the router):
    ChannelUnavailable   the Telegram send was refused; `retry_after_s` when Telegram gave one
    ChiefUnavailable     the Chief could not take the report (chief.db failed)
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import anyio
import structlog

from chief.door.config import REPORT_WAIT_S
from chief.door.locks import KeyedLocks
from chief.door.posture import PostureSource, PostureUnavailable
from chief.errors import ChiefError, DoorError, TelegramUnavailable
from chief.faults import fault
from chief.telegram.sender import TelegramSender

log = structlog.get_logger("chief.door")

CHANNEL = "telegram"


class ChannelUnavailable(DoorError):
    """Telegram did not take the message; the engine keeps the row and retries later."""

    def __init__(self, message: str | None = None, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ChiefUnavailable(DoorError):
    """The Chief could not take the report (chief.db failed); the engine retries the row later."""


class ChiefPort(Protocol):
    """What the door needs of `chief.conversation.Chief`."""

    async def report_notify(
        self, text: str, outbox_id: str, *, wait: float | None
    ) -> tuple[int | None, bool]: ...
    async def notify_sent(self, outbox_id: str) -> bool: ...
    async def mark_notify_sent(self, outbox_id: str, telegram_message_id: int) -> None: ...
    async def undelivered_count(self) -> int: ...
    async def sent_count(self) -> int: ...


class DoorService:
    """The door's state: the Chief, the Telegram sender, the posture source and the row locks."""

    def __init__(
        self,
        *,
        chief: ChiefPort | None,
        sender: TelegramSender | None,
        posture: PostureSource,
    ) -> None:
        self.chief = chief
        self.sender = sender
        self.posture = posture
        self.locks = KeyedLocks()
        #: notify requests inside the door right now: bounded by the report wait and the
        #: Telegram timeout, so retries never pile up behind a busy Chief.
        self.in_flight = 0
        #: Rows Telegram accepted whose sent mark failed (a full disk): outbox id -> message id.
        #: Their mark is written before the next answer for the row, so only a crash between
        #: the send and the mark can ring the phone twice.
        self.unmarked: dict[str, int] = {}
        # Sent marks attempted by this door: a sent flag read before the count moved is stale.
        self._marks = 0
        self._started_monotonic = time.monotonic()

    async def notify(self, text: str, kind: str, outbox_id: str | None) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self._notify(text, kind, outbox_id)
        finally:
            self.in_flight -= 1

    async def _notify(self, text: str, kind: str, outbox_id: str | None) -> dict[str, Any]:
        bound = log.bind(outbox_id=outbox_id, kind=kind)
        if outbox_id is None:
            telegram_id = await self._send(text, bound)
            bound.info("door.delivered", telegram_message_id=telegram_id)
            return _answer(outbox_id=None, chief_message_id=None)
        chief = self._chief()
        marks_seen = self._marks
        try:
            chief_message_id, sent = await chief.report_notify(text, outbox_id, wait=REPORT_WAIT_S)
        except ChiefError as exc:
            bound.error("door.chief_failed", error=str(exc))
            raise ChiefUnavailable(f"the Chief could not take the report: {exc}") from exc
        fault("door.after_report")
        async with self.locks.hold(outbox_id):
            if outbox_id in self.unmarked:
                # Rang already; its mark failed before. Write the mark, ring nothing.
                await self._mark(chief, outbox_id, self.unmarked[outbox_id], bound)
                bound.info("door.already_sent", chief_message_id=chief_message_id)
                return _answer(outbox_id, chief_message_id, already_sent=True)
            if self._marks != marks_seen:
                # A mark was written since the flag was read (maybe by a retry of this row).
                sent = await self._sent(chief, outbox_id, bound)
            if sent:
                bound.info("door.already_sent", chief_message_id=chief_message_id)
                return _answer(outbox_id, chief_message_id, already_sent=True)
            telegram_id = await self._send(text, bound)
            fault("door.after_telegram_send")
            # Telegram has the message: record that even if this request is being cancelled,
            # or the next retry rings the phone again.
            with anyio.CancelScope(shield=True):
                await self._mark(chief, outbox_id, telegram_id, bound)
        bound.info(
            "door.delivered", telegram_message_id=telegram_id, chief_message_id=chief_message_id
        )
        return _answer(outbox_id, chief_message_id)

    async def status(self) -> dict[str, Any]:
        chief = self._chief()
        try:
            posture: str = self.posture.read()
        except PostureUnavailable:
            posture = "unavailable"
        try:
            undelivered = await chief.undelivered_count()
            sent = await chief.sent_count()
        except ChiefError as exc:
            raise ChiefUnavailable(f"the Chief could not be read: {exc}") from exc
        return {
            "undelivered_reports": undelivered,
            "sent_count": sent,
            "posture": posture,
            "telegram_configured": self.sender is not None,
            "uptime_s": round(time.monotonic() - self._started_monotonic, 3),
            "notify_locks": len(self.locks),
            "notify_in_flight": self.in_flight,
            "unmarked_sends": len(self.unmarked),
        }

    def _chief(self) -> ChiefPort:
        if self.chief is None:
            # The guard answers owner_unconfigured before any verb runs; reaching here is a
            # host application mounting the router without a Chief.
            raise ChiefUnavailable("no Chief is open: set CHIEF_OWNER and restart the door")
        return self.chief

    async def _send(self, text: str, bound: Any) -> int:
        if self.sender is None:
            bound.warning("door.send_failed", reason="telegram_unconfigured")
            raise ChannelUnavailable(
                "Telegram is not configured: set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID"
            )
        try:
            return await self.sender.send(text)
        except TelegramUnavailable as exc:
            bound.warning("door.send_failed", error=exc.message, retry_after_s=exc.retry_after_s)
            raise ChannelUnavailable(exc.message, retry_after_s=exc.retry_after_s) from exc

    async def _sent(self, chief: ChiefPort, outbox_id: str, bound: Any) -> bool:
        try:
            return await chief.notify_sent(outbox_id)
        except ChiefError as exc:
            bound.error("door.chief_failed", error=str(exc))
            raise ChiefUnavailable(f"the sent table could not be read: {exc}") from exc

    async def _mark(self, chief: ChiefPort, outbox_id: str, telegram_id: int, bound: Any) -> None:
        try:
            await chief.mark_notify_sent(outbox_id, telegram_id)
        except ChiefError as exc:
            self._marks += 1  # it may have been written before the error
            # Sent but not marked: remembered, so the engine's retry writes the mark instead of
            # ringing again.
            self.unmarked[outbox_id] = telegram_id
            bound.error("door.mark_failed", telegram_message_id=telegram_id, error=str(exc))
            raise ChiefUnavailable(f"sent, but the sent mark failed: {exc}") from exc
        self.unmarked.pop(outbox_id, None)
        self._marks += 1


def _answer(
    outbox_id: str | None, chief_message_id: int | None, *, already_sent: bool = False
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "delivered": True,
        "channel": CHANNEL,
        "outbox_id": outbox_id,
        "chief_message_id": chief_message_id,
    }
    if already_sent:
        answer["already_sent"] = True
    return answer
