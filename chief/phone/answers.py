"""The owner's answers from the phone: the tap path and the forwarder (the phone's half of the
second path, the reverse of the notify door).

A tap on an ask message's button, or a text reply to it, from the obeyed user (the phone loop,
`chief.phone.updater`, has already turned strangers away) goes (a reply's text is taken as `coop`
takes an argument: one holding a NUL is refused, and one past the ledger's limit is cut with a
marker; either way the owner is told, in a reply to the ask message, by `chief.answer_rules`):

    record      chief.db, one FULL commit (chief.store.answers, ruled by chief.answer_rules):
                a new pending answer, or nothing (a replay, a double tap, a void token, a
                token read on another request's ask message)
    [crash]     fault point `door.answer_recorded`: the answer is durable and not yet sent;
                the next start's forwarder sends it (the phone did not record the update
                as handled either, so it comes again and finds its row by its key)
    forward     the forwarder posts it to the ledger (`EngineLink.answer`, POST
                /api/coop/phone/answer with the answer's key and the ask key of the question:
                the ledger applies it only to the request bearing that key, else answers
                `not_this_request`, its id having come back); the tap waits for that at most
                TAP_WAIT_S, so its toast goes within a second
    toast       answerCallbackQuery: what the ledger said, or, if it has not answered yet,
                that the answer is saved and will be applied when the ledger answers
    settle      the ledger's answer written once on the row (applied | refused) and, for a
                closed, already-closed or unknown request, or a question no longer in the
                ledger, in the same transaction, that ask (by its key) settled: its buttons
                void and an edit queued for each message that rang it (its text and the
                outcome, no buttons), which the door's ask task
                (`chief.phone.asks`) performs and retries; a text kept as a note, or a choice
                the request does not offer, leaves the message as it is. The ledger's own
                settle row for the close, arriving later, finds the asks settled: one edit.

Exactly once rests on the ledger: it keeps each answer's key (`coop_answers`), so a retry with
the same key (after a lost reply, a killed door, a killed `coop serve`) answers its recorded
outcome and closes nothing twice. The forwarder retries each pending answer with a bounded
backoff; an unreachable ledger is logged once per outage, and the answers waiting for it are
counted (`pending`, in the door's status and /metrics).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import structlog

from chief.answer_rules import (
    ANSWER_KEY_PREFIX,
    OUTCOMES,
    Answer,
    Button,
    Refused,
    Reply,
    Seen,
    Tap,
    backoff_s,
    cut_note,
    decide_reply,
    decide_tap,
    settled_line,
    toast_for,
)
from chief.errors import ChiefError, EngineUnreachable
from chief.telegram.update_key import update_key
from plumbing.faults import fault

if TYPE_CHECKING:
    import sqlite3

    import telegram

    from chief.phone.urgent import Urgent
    from chief.store import ChiefStore
    from chief.store.answers import AskOf, ButtonOf

log = structlog.get_logger("chief.phone.answers")

# How long a tap waits for the ledger before its toast says "saved": the toast must go within
# a second of the tap, and answerCallbackQuery itself takes a round trip.
TAP_WAIT_S = 0.7
# One forwarder pass looks at this many open answers at most (the rest come next pass).
OPEN_BATCH = 50
# After chief.db failed a pass, the forwarder tries again after this long.
RETRY_S = 1.0
# With nothing due, the forwarder still looks again this often (a cheap read).
IDLE_RECHECK_S = 30.0


class AnswerLink(Protocol):
    """The ledger's answer route (`chief.phone.engine_link.EngineLink.answer`)."""

    async def answer(
        self,
        answer_key: str,
        request_id: int,
        ask_key: str,
        choice: str | None = None,
        text: str | None = None,
    ) -> dict[str, Any]: ...


class AnswerPhone(Protocol):
    """What the answers need of Telegram (`chief.telegram.inbound.TelegramPhone`)."""

    async def answer_callback(self, query_id: str, text: str) -> None: ...
    async def reply(
        self, chat_id: int, text: str, *, reply_to: int | None = None
    ) -> int | None: ...


def new_answer_key() -> str:
    """`a-` and 16 random bytes in hex: the ledger's exactly-once key of one answer."""
    return ANSWER_KEY_PREFIX + secrets.token_hex(16)


@dataclass
class Answers:
    """The door's `UpdateHandlers` for taps and replies, and the forwarder task (`run`)."""

    store: ChiefStore
    phone: AnswerPhone
    link: AnswerLink
    button_of: ButtonOf
    ask_of: AskOf
    #: wakes the ask task once a settle queued its edits (`chief.phone.asks.Asks.nudge`)
    edits_queued: Callable[[], None] = lambda: None
    clock: Callable[[], float] = time.time
    #: the urgent reports (chief.phone.urgent): "Got it" and a reply acknowledge one
    urgent: Urgent | None = None
    _wake: anyio.Event = field(default_factory=anyio.Event)
    _settled: dict[str, anyio.Event] = field(default_factory=dict)
    _outage: bool = False

    # -- the handlers the phone loop calls -------------------------------------------------

    async def on_tap(self, update: telegram.Update) -> None:
        """A button pressed by the obeyed user: record, forward (bounded), toast."""
        query = update.callback_query
        if query is None or query.message is None:
            return
        if self.urgent is not None and (toast := await self.urgent.tap(query.data or "")):
            await self._toast(query.id, toast)  # "Got it": acknowledged (FULL) before this
            return
        message = query.message
        tap = Tap(
            update_id=update.update_id,
            token=query.data or "",
            callback_query_id=query.id,
            chat_id=message.chat.id,
            message_id=message.message_id,
            ask_text=getattr(message, "text", None) or "",
            update_key=update_key(update),
        )
        recorded = await self.store.record_tap(
            tap, new_answer_key(), self._button_on(tap), decide_tap
        )
        if isinstance(recorded, Refused):
            await self._toast(query.id, recorded.toast)
            return
        answer = recorded.answer if isinstance(recorded, Seen) else recorded
        if not isinstance(recorded, Seen):
            fault("door.answer_recorded")
            log.info("answers.recorded", answer_key=answer.answer_key, request_id=answer.request_id)
        answer = await self._wait_settled(answer)
        await self._toast(query.id, toast_for(answer))

    def _button_on(self, tap: Tap) -> ButtonOf:
        """`button_of`, for this tap's message only: a token read on a message that rang
        another question (another ask key) is no button of it (callback data that message's
        buttons never held), so it decides nothing. A message not (yet) known as an ask keeps
        the token's word."""

        def button(conn: sqlite3.Connection, token: str) -> Button | None:
            found = self.button_of(conn, token)
            if found is None:
                return None
            asked = self.ask_of(conn, tap.chat_id, tap.message_id)
            return found if asked is None or asked[1] == found.ask_key else None

        return button

    async def on_reply(self, update: telegram.Update) -> None:
        """A text reply by the obeyed user: an answer when it replies to an ask message."""
        message = update.message
        if message is None or message.reply_to_message is None or not message.text:
            return
        replied = message.reply_to_message
        if self.urgent is not None:  # a reply to an urgent ring acknowledges it, and goes on
            await self.urgent.reply(message.chat.id, replied.message_id)
        reply = Reply(
            update_id=update.update_id,
            text=message.text,
            chat_id=message.chat.id,
            message_id=replied.message_id,
            ask_text=replied.text or "",
            update_key=update_key(update),
        )
        recorded = await self.store.record_reply(reply, new_answer_key(), self.ask_of, decide_reply)
        if isinstance(recorded, Refused):
            await self._tell(reply, recorded.toast)
            return
        if recorded is None or isinstance(recorded, Seen):
            return
        fault("door.answer_recorded")
        log.info("answers.recorded", answer_key=recorded.answer_key, request_id=recorded.request_id)
        note = cut_note(recorded.request_id, reply.text)
        if note is not None:
            await self._tell(reply, note)
        await self._wait_settled(recorded)

    async def _tell(self, reply: Reply, text: str) -> None:
        """Tell the owner what became of their reply, in reply to the ask message it answers
        (the bot's own, so Telegram always finds it)."""
        try:
            await self.phone.reply(reply.chat_id, text, reply_to=reply.message_id)
        except ChiefError as exc:  # the answer stands (or was refused) all the same
            log.info(
                "answers.reply_note_failed", telegram_message_id=reply.message_id, error=str(exc)
            )

    async def _wait_settled(self, answer: Answer) -> Answer:
        """Hand a pending answer to the forwarder and wait for the ledger's answer, at most
        TAP_WAIT_S; the row as it then stands."""
        if answer.state != "pending":
            return answer
        settled = self._settled.setdefault(answer.answer_key, anyio.Event())
        self._wake.set()
        with anyio.move_on_after(TAP_WAIT_S):
            await settled.wait()
        self._settled.pop(answer.answer_key, None)
        return await self.store.answer_by_key(answer.answer_key) or answer

    async def _toast(self, query_id: str, text: str) -> None:
        try:
            await self.phone.answer_callback(query_id, text)
        except ChiefError as exc:  # a replayed query is too old to answer: nothing to tell
            log.info("answers.toast_failed", query_id=query_id, error=str(exc))

    # -- the forwarder ------------------------------------------------------------------

    async def pending(self) -> int:
        """Answers still waiting for the ledger (the door's status and /metrics)."""
        return await self.store.pending_answers()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Forward the pending answers (what the last run left first), until cancelled."""
        task_status.started()
        while True:
            wait_s = IDLE_RECHECK_S
            try:
                wait_s = await self._pass()
            except ChiefError as exc:  # chief.db failed: try again shortly
                log.error("answers.pass_failed", error=str(exc))
                wait_s = RETRY_S
            with anyio.move_on_after(max(0.0, wait_s)):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def _pass(self) -> float:
        """One pass over the pending answers; how long until the next one is due."""
        wait_s = IDLE_RECHECK_S
        for answer in await self.store.open_answers(OPEN_BATCH):
            now = self.clock()
            if answer.next_attempt_at > now:
                wait_s = min(wait_s, answer.next_attempt_at - now)
            elif not await self._forward(answer):
                wait_s = min(wait_s, backoff_s(answer.attempts + 1))
        return wait_s

    async def _forward(self, answer: Answer) -> bool:
        """One try at the ledger; whether it answered (else deferred with a backoff)."""
        try:
            reply = await self.link.answer(
                answer.answer_key,
                answer.request_id,
                answer.ask_key,
                choice=answer.choice,
                text=answer.text,
            )
        except ChiefError as exc:
            self._note_outage(exc, answer)
            next_at = self.clock() + backoff_s(answer.attempts + 1)
            await self.store.defer_answer(answer.answer_key, next_at, str(exc))
            return False
        if self._outage:
            self._outage = False
            log.info("answers.engine_back", pending=await self.store.pending_answers())
        outcome, detail = str(reply.get("outcome")), str(reply.get("detail") or "")
        if outcome not in OUTCOMES:  # a ledger this door does not understand: keep it pending
            log.error("answers.outcome_unknown", answer_key=answer.answer_key, outcome=outcome)
            next_at = self.clock() + backoff_s(answer.attempts + 1)
            await self.store.defer_answer(answer.answer_key, next_at, f"outcome {outcome!r}")
            return False
        with anyio.CancelScope(shield=True):  # the ledger has applied it: record that
            settled, edits = await self.store.settle_answer(
                answer.answer_key, outcome, detail, settled_line
            )
        if edits:
            self.edits_queued()
        log.info(
            "answers.applied" if settled and settled.state == "applied" else "answers.refused",
            answer_key=answer.answer_key,
            request_id=answer.request_id,
            outcome=outcome,
        )
        event = self._settled.pop(answer.answer_key, None)
        if event is not None:
            event.set()
        return True

    def _note_outage(self, exc: ChiefError, answer: Answer) -> None:
        """Log the first failed try of an outage (not every retry): nothing answers, or the
        ledger service refuses (a wrong key, its store failing)."""
        if not self._outage:
            self._outage = True
            event = (
                "answers.engine_unreachable"
                if isinstance(exc, EngineUnreachable)
                else "answers.engine_refused"
            )
            log.warning(event, error=str(exc), answer_key=answer.answer_key)
