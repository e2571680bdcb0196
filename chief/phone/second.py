"""The second person on the phone (issue 35): what their taps and replies do.

The phone loop (`chief.phone.updater`) routes the second person's updates here, and their
commands to `Commands.run(..., owner=False)` (/status and /help only). They acknowledge urgent
reports and decide nothing:

    a tap on "Got it"     the report acknowledged by the second person (`Urgent.tap`): every rung
                          stops, the toast says so
    any other tap         a request's choice, a stale button: refused with a toast
                          (`SECOND_MAY_NOT_DECIDE`), nothing recorded: deciding stays the owner's
    a reply               to a message that rang an urgent report in their chat: acknowledged;
                          to anything else: nothing
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog

from chief.errors import ChiefError
from chief.urgent_rules import SECOND, SECOND_MAY_NOT_DECIDE

if TYPE_CHECKING:
    import telegram

    from chief.phone.urgent import Urgent

log = structlog.get_logger("chief.door")


class Toaster(Protocol):
    """What the second person's taps need of Telegram (`chief.telegram.inbound`)."""

    async def answer_callback(self, query_id: str, text: str) -> None: ...


class SecondPerson:
    """The second person's `UpdateHandlers` (taps and replies)."""

    def __init__(self, urgent: Urgent, phone: Toaster) -> None:
        self.urgent = urgent
        self.phone = phone

    async def on_tap(self, update: telegram.Update) -> None:
        query = update.callback_query
        if query is None:
            return
        toast = await self.urgent.tap(query.data or "", by=SECOND)
        if toast is None:
            log.info("door.second_tap_refused", update_id=update.update_id)
            toast = SECOND_MAY_NOT_DECIDE
        try:
            await self.phone.answer_callback(query.id, toast)
        except ChiefError as exc:  # a replayed query is too old to answer: nothing to tell
            log.info("door.second_toast_failed", query_id=query.id, error=str(exc))

    async def on_reply(self, update: telegram.Update) -> None:
        message = update.message
        if message is None or message.reply_to_message is None:
            return
        await self.urgent.reply(message.chat.id, message.reply_to_message.message_id, by=SECOND)
