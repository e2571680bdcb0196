"""The door's verbs: `notify` and `notify_batch` (accept: the Chief line and the Telegram entry,
durably) and `status` (with the Telegram queue: depth, oldest age, last error, next try, and
Telegram's permanent refusal when there is one; `telegram_queue` is its depth and age for
monitoring).

    notify(text, kind, outbox_id, extras):
      with an outbox id:  one transaction in chief.db: the report row (keyed INSERT OR IGNORE),
                          and, unless the row already rang or its extras say `ring: false`, its
                          Telegram queue entry (an ask's with its button tokens; a `settles`
                          voids the request's buttons and queues the edit of its ask message,
                          taken by the ask task, `chief.phone.asks`); then the
                          report's bounded wait to land (REPORT_WAIT_S) and, when the entry
                          could ring at once, a short wait for the ring (ringer.RING_WAIT_S)
      without one:        the Telegram entry alone (nothing to deduplicate by)
    notify_batch([(text, kind, outbox_id, extras), ...]):
                          the rows the router accepted (those before a batch's first refused
                          item), every row as `notify` with an outbox id, in ONE accept
                          transaction (all durable, or none: 503 chief_unavailable), one report wait
                          for the batch and one short ring wait (its entries ring together,
                          as one digest when they fit); one answer per row, in order, and
                          one log event for the batch naming every row

Accepted means durable: the Chief line is landed or queued and the Telegram entry is queued.
The answer is 200 with "telegram": "sent" and its message id when the ring completed within the
short wait, "queued" otherwise, "not_configured" when the door has no Telegram, "not_rung" when
nothing is to ring (`ring: false`, or an ask settled before it rang). The sender task
(`chief.phone.ringer`) drains the queue in order, paced, with digests and quiet hours. Telegram
failures never reach the engine and never hold back the Chief.

This departs from seed 001's inline send on purpose: there a refused send answered
`503 notification_channel_unavailable`, and the engine's strict FIFO held every later row, and
the Chief line of every later row, behind Telegram. Now that 503 means only a door that cannot
queue: a notify without an outbox id (Telegram alone) when Telegram is not configured.

Errors (both `chief.errors.DoorError`s, both answered 503 by the router): `ChannelUnavailable`
(the notify could not be queued for Telegram) and `ChiefUnavailable` (chief.db failed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from chief.door.config import REPORT_WAIT_S
from chief.door.posture import PostureSource, PostureUnavailable
from chief.errors import ChannelUnavailable, ChiefError, ChiefUnavailable, TelegramRefused
from chief.model import NO_EXTRAS, Extras
from chief.phone.ringer import Ringer, Rung
from plumbing.faults import fault
from plumbing.refusals import RefusalTally

if TYPE_CHECKING:  # the store loads when the door starts
    from chief.fallback.task import Fallback
    from chief.phone.asks import Asks
    from chief.phone.reminders import Reminders
    from chief.phone.urgent import Urgent
    from chief.store import Accepted, TelegramQueueStatus

log = structlog.get_logger("chief.door")

CHANNEL = "telegram"


class ChiefPort(Protocol):
    """What the door needs of `chief.conversation.Chief`."""

    async def report_notify(
        self,
        text: str,
        outbox_id: str,
        *,
        wait: float | None,
        queue_telegram: bool,
        extras: Extras = NO_EXTRAS,
    ) -> tuple[int | None, Accepted]: ...
    async def report_notify_batch(
        self,
        rows: list[tuple[str, str]],
        *,
        wait: float | None,
        queue_telegram: bool,
        extras: list[Extras] | None = None,
    ) -> list[tuple[int | None, Accepted]]: ...
    async def queue_telegram(self, text: str) -> tuple[int, int]: ...
    async def undelivered_count(self) -> int: ...
    async def sent_count(self) -> int: ...
    async def telegram_status(self) -> TelegramQueueStatus: ...
    async def pending_answers(self) -> int: ...


class DoorVerbs:
    """The door's state: the Chief, the Telegram sender task and the posture source."""

    def __init__(
        self,
        *,
        chief: ChiefPort | None,
        ringer: Ringer | None,
        posture: PostureSource,
        wall_clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.chief = chief
        self.ringer = ringer
        #: the ask task (settles' edits, reask), when Telegram is configured and the Chief open
        self.asks: Asks | None = None
        #: the asks' reminders (issue 28), beside the ask task
        self.reminders: Reminders | None = None
        #: the urgent reports (issue 28), likewise
        self.urgent: Urgent | None = None
        #: the fallback channel's task (issue 35, rung 3) while it runs; None: none configured
        self.fallback: Fallback | None = None
        self.posture = posture
        self._wall_clock = wall_clock or (lambda: datetime.now(UTC))
        #: notify requests inside the door right now: bounded by the report wait and the ring
        #: wait, so retries never pile up behind a busy Chief or a slow Telegram.
        self.in_flight = 0
        self._started_monotonic = time.monotonic()
        #: the guard's refusals, counted by reason and summed up in the log (`guard.say_refused`)
        self.refusals = RefusalTally()
        #: what to do before Telegram rings (a token set and no chat: pair), for the status
        self.telegram_next_step: str | None = None
        #: the phone's poll conflict while it lasts (another reader, a webhook), for the status
        self.poll_conflict: Callable[[], str | None] = lambda: None

    @property
    def telegram_configured(self) -> bool:
        return self.ringer is not None

    async def notify(
        self, text: str, kind: str, outbox_id: str | None, extras: Extras = NO_EXTRAS
    ) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self._notify(text, kind, outbox_id, extras)
        finally:
            self.in_flight -= 1

    async def _notify(
        self, text: str, kind: str, outbox_id: str | None, extras: Extras
    ) -> dict[str, Any]:
        bound = log.bind(delivery_key=outbox_id, kind=kind)
        chief = self._chief()
        if outbox_id is None:  # the router takes extras only with an outbox id
            return await self._notify_telegram_alone(chief, text, bound)
        try:
            chief_message_id, reported = await chief.report_notify(
                text,
                outbox_id,
                wait=REPORT_WAIT_S,
                queue_telegram=self.ringer is not None,
                extras=extras,
            )
        except ChiefError as exc:
            bound.error("door.chief_failed", error=str(exc))
            raise ChiefUnavailable(f"the Chief could not take the report: {exc}") from exc
        self._after_settles([extras])
        fault("door.after_report")
        answer = _answer(outbox_id, chief_message_id)
        telegram = self._telegram_known(outbox_id, reported)
        if telegram is None:
            assert self.ringer is not None
            assert reported.telegram_seq is not None
            telegram = _ring_answer(
                await self.ringer.ring_wait(reported.telegram_seq, reported.telegram_ahead)
            )
        answer |= telegram
        _log_answer(bound, answer)
        return answer

    async def notify_batch(self, items: list[tuple[str, str, str, Extras]]) -> list[dict[str, Any]]:
        """`notify` for every `(text, kind, outbox_id, extras)` of a batch, in order, with ONE
        accept transaction: every row's Chief line is landed or queued and its Telegram entry
        queued, or (ChiefUnavailable) none is. One answer per row, each what `notify` answers for it
        alone (a row already rung answers already_sent). The bounded waits are the batch's: one
        report wait, and one short ring wait for the message that carries its earliest entry."""
        self.in_flight += 1
        try:
            return await self._notify_batch(items)
        finally:
            self.in_flight -= 1

    async def _notify_batch(
        self, items: list[tuple[str, str, str, Extras]]
    ) -> list[dict[str, Any]]:
        chief = self._chief()
        outbox_ids = [outbox_id for _, _, outbox_id, _ in items]
        extras = [extra for _, _, _, extra in items]
        try:
            reported = await chief.report_notify_batch(
                [(text, outbox_id) for text, _, outbox_id, _ in items],
                wait=REPORT_WAIT_S,
                queue_telegram=self.ringer is not None,
                extras=extras,
            )
        except ChiefError as exc:
            log.error("door.chief_failed", delivery_keys=outbox_ids, error=str(exc))
            raise ChiefUnavailable(f"the Chief could not take the batch: {exc}") from exc
        self._after_settles(extras)
        fault("door.after_report")
        answers = []
        to_ring: list[tuple[int, tuple[int, int]]] = []  # (answer index, (seq, ahead))
        for index, (outbox_id, (chief_message_id, row)) in enumerate(
            zip(outbox_ids, reported, strict=True)
        ):
            answer = _answer(outbox_id, chief_message_id)
            telegram = self._telegram_known(outbox_id, row)
            if telegram is None:
                assert row.telegram_seq is not None
                to_ring.append((index, (row.telegram_seq, row.telegram_ahead)))
            else:
                answer |= telegram
            answers.append(answer)
        if to_ring:
            assert self.ringer is not None
            rung = await self.ringer.ring_wait_many([entry for _, entry in to_ring])
            for (index, _), ring in zip(to_ring, rung, strict=True):
                answers[index] |= _ring_answer(ring)
        _log_batch(outbox_ids, answers)
        return answers

    def _after_settles(self, extras: list[Extras]) -> None:
        """Wake the ask task when a settle or an amendment queued edits (committed with the
        report)."""
        edits = any(extra.settles is not None or extra.amends is not None for extra in extras)
        if self.asks is not None and edits:
            self.asks.nudge()
        if self.urgent is not None and any(extra.urgent for extra in extras):
            self.urgent.accepted()  # the nag task schedules its repeats

    def _telegram_known(self, outbox_id: str, reported: Accepted) -> dict[str, Any] | None:
        """The Telegram part of a row's answer when it is known without waiting (not
        configured, already rung, not to ring: `ring: false`, or an ask settled before it
        rang); None when the row's entry is queued and may ring now."""
        if self.ringer is None:
            return {"telegram": "not_configured"}
        if reported.already_sent:
            return {
                "telegram": "sent",
                "telegram_message_id": reported.telegram_message_id,
                "already_sent": True,
            }
        if (unmarked := self.ringer.unmarked_ring(outbox_id)) is not None:
            # Rang, its mark not written yet (a full disk): the sender writes it before
            # anything else rings.
            return _ring_answer(unmarked) | {"already_sent": True}
        if reported.telegram_seq is None:
            return {"telegram": "not_rung"}
        return None

    async def _notify_telegram_alone(
        self, chief: ChiefPort, text: str, bound: Any
    ) -> dict[str, Any]:
        if self.ringer is None:
            bound.warning("door.send_failed", reason="telegram_unconfigured")
            raise ChannelUnavailable(
                "Telegram is not configured and the notify has no outbox id: nothing can carry "
                "it; set TELEGRAM_BOT_TOKEN and TELEGRAM_CHAT_ID"
            )
        try:
            seq, ahead = await chief.queue_telegram(text)
        except ChiefError as exc:
            bound.error("door.chief_failed", error=str(exc))
            raise ChiefUnavailable(f"the Telegram entry could not be queued: {exc}") from exc
        answer = _answer(None, None) | _ring_answer(await self.ringer.ring_wait(seq, ahead))
        bound.info("door.delivered", telegram=answer["telegram"])
        return answer

    async def status(self) -> dict[str, Any]:
        chief = self._chief()
        try:
            posture: str = self.posture.read()
        except PostureUnavailable:
            posture = "unavailable"
        try:
            undelivered = await chief.undelivered_count()
            sent = await chief.sent_count()
            queue = await chief.telegram_status()
            answers_pending = await chief.pending_answers()
            reminders = await self._reminders()
            urgent = await self._urgent_status()
            fallback = await self._fallback_status()
        except ChiefError as exc:
            raise ChiefUnavailable(f"the Chief could not be read: {exc}") from exc
        return {
            "undelivered_reports": undelivered,
            "sent_count": sent,
            "posture": posture,
            "telegram_configured": self.ringer is not None,
            "telegram_next_step": self.telegram_next_step,
            "uptime_s": round(time.monotonic() - self._started_monotonic, 3),
            "notify_locks": 0 if self.ringer is None else len(self.ringer.locks),
            "notify_in_flight": self.in_flight,
            "telegram_queue": self._queue_status(queue),
            "telegram_quiet_hours": self._quiet_hours(),
            "telegram_chat_moved": self._chat_moved(),
            "telegram_poll_conflict": self.poll_conflict(),
            "answers_pending": answers_pending,
            "reminders": reminders,
            "urgent": urgent,
            "fallback": fallback,
        }

    async def _fallback_status(self) -> dict[str, Any]:
        """The status's `fallback` part (`chief.fallback.task`); `configured` false
        without one."""
        if self.fallback is None:
            return {"configured": False}
        return await self.fallback.status()

    def _chat_moved(self) -> dict[str, Any] | None:
        """The group Telegram made a supergroup, which the sender followed (None: none)."""
        moved = None if self.ringer is None else self.ringer.chat_moved
        return None if moved is None else moved.as_status()

    def _quiet_hours(self) -> dict[str, Any] | None:
        """TELEGRAM_QUIET_HOURS as the status says it (window, zone, in force now); None when
        unset or without Telegram."""
        hours = None if self.ringer is None else self.ringer.quiet_hours
        return None if hours is None else hours.state(self._wall_clock().timestamp())

    async def _reminders(self) -> dict[str, Any]:
        """The reminders scheduled and the next one due (none without Telegram)."""
        if self.reminders is None:
            return {"scheduled": 0, "next": None}
        return await self.reminders.status()

    async def _urgent_status(self) -> dict[str, Any]:
        """The status's `urgent` part (chief.phone.urgent); empty without Telegram."""
        if self.urgent is None:
            return {"ringing": [], "next": None, "acknowledged": 0, "expired_unacknowledged": []}
        return await self.urgent.status()

    async def telegram_queue(self) -> tuple[int, float, int]:
        """The Telegram queue's depth, its oldest entry's age in seconds (0 when empty) and the
        in-doubt events chief.db recorded, as monitoring reads them; (0, 0.0, 0) when Telegram
        is not configured: nothing there rings, so nothing there is an outage. Raises
        ChiefUnavailable when chief.db cannot be read."""
        if self.ringer is None:
            return 0, 0.0, 0
        try:
            queue = await self._chief().telegram_status()
        except ChiefError as exc:
            raise ChiefUnavailable(f"the Chief could not be read: {exc}") from exc
        answer = self._queue_status(queue)
        return answer["depth"], answer["oldest_age_s"] or 0.0, queue.in_doubt_events

    def _queue_status(self, queue: TelegramQueueStatus) -> dict[str, Any]:
        now = self._wall_clock()
        oldest_age_s = None
        if queue.oldest_queued_at is not None:
            oldest = datetime.fromisoformat(queue.oldest_queued_at)
            oldest_age_s = round(max(0.0, (now - oldest).total_seconds()), 3)
        next_in_s = None
        if queue.next_attempt_at is not None:
            next_in_s = round(max(0.0, queue.next_attempt_at - now.timestamp()), 3)
        ringer = self.ringer
        return {
            "depth": queue.depth,
            "oldest_age_s": oldest_age_s,
            "last_error": queue.last_error or (ringer.last_error if ringer else None),
            "next_attempt_in_s": next_in_s,
            "unmarked_sends": 0 if ringer is None or ringer.unmarked is None else 1,
            "messages_sent": 0 if ringer is None else ringer.sent_messages,
            "refusal": _refusal(ringer.refusal if ringer else None),
            **_send_in_flight(ringer, queue),
        }

    def _chief(self) -> ChiefPort:
        if self.chief is None:
            # The guard answers owner_unconfigured before any verb runs; reaching here is a
            # host application mounting the router without a Chief.
            raise ChiefUnavailable("no Chief is open: set CHIEF_OWNER and restart the door")
        return self.chief


def _refusal(refused: TelegramRefused | None) -> dict[str, str] | None:
    """Telegram's permanent refusal as the status shows it: which, its answer, what to do."""
    if refused is None:
        return None
    return {"kind": refused.kind, "answer": refused.answer, "action": refused.action}


def _send_in_flight(ringer: Ringer | None, queue: TelegramQueueStatus) -> dict[str, Any]:
    """The send in flight (how long it waited, whether past the deadline) and the in-doubt
    events chief.db recorded: sends whose rows may ring once more, marked."""
    sending_s = None if ringer is None else ringer.sending_s()
    slow = ringer is not None and sending_s is not None and sending_s > ringer.slow_after_s
    return {
        "sending_s": None if sending_s is None else round(sending_s, 3),
        "send_slow": slow,
        "in_doubt_events": queue.in_doubt_events,
    }


def _log_answer(bound: Any, answer: dict[str, Any]) -> None:
    event = "door.already_sent" if answer.get("already_sent") else "door.delivered"
    bound.info(
        event,
        chief_message_id=answer["chief_message_id"],
        telegram=answer["telegram"],
        telegram_message_id=answer.get("telegram_message_id"),
    )


def _log_batch(outbox_ids: list[str], answers: list[dict[str, Any]]) -> None:
    """One event for a whole batch, naming every row: an event costs the door ~65 us of CPU,
    as much as the rest of a row's work, so one per row would double the batch route's cost.
    `door.already_sent` when every row had already rung, as the single route says it."""
    repeats = [answer["outbox_id"] for answer in answers if answer.get("already_sent")]
    telegram: dict[str, int] = {}
    for answer in answers:
        telegram[answer["telegram"]] = telegram.get(answer["telegram"], 0) + 1
    log.info(
        "door.already_sent" if len(repeats) == len(answers) else "door.delivered",
        batch=len(answers),
        delivery_keys=outbox_ids,
        already_sent=repeats,
        chief_message_ids=[answer["chief_message_id"] for answer in answers],
        telegram=telegram,
    )


def _ring_answer(rung: Rung | None) -> dict[str, Any]:
    """A ring's part of a notify's answer: sent (its message id, None when Telegram's answer
    could not name it), or still queued."""
    if rung is None:
        return {"telegram": "queued"}
    return {"telegram": "sent", "telegram_message_id": rung.telegram_message_id}


def _answer(outbox_id: str | None, chief_message_id: int | None) -> dict[str, Any]:
    return {
        "delivered": True,
        "channel": CHANNEL,
        "outbox_id": outbox_id,
        "chief_message_id": chief_message_id,
    }
