"""The phone's updater: a task that long-polls Telegram for the owner's updates, routes each.

    at the start     the commands registered (setMyCommands, once: a failure is logged, never
                     fatal; tried again quietly before each poll of an outage until it is
                     registered); the first poll sends no offset
    loop:
      poll           getUpdates(offset, POLL_TIMEOUT_S): Telegram holds it open until an
                     update arrives or the poll times out; a stop cancels it at once
      for each update, in order, known by its key (its id and a digest of its content,
      `chief.telegram.update_key`), never by its id alone:
        seen before  its key among the updates handled (chief.db keeps the last
                     `inbox.MAX_SEEN`): Telegram delivered it again (a crash before the
                     confirmation reached it), the emulator replayed it; nothing again
        ids went back  an id below the last one: logged once, in words, and handled like any
                     other (Telegram picks a random id after a week without updates; the
                     emulator starts again from 1 on a restart)
        the second   the second person in their own chat (issue 35, `chief.phone.second`): a
                     tap or a reply goes to `second.on_tap` / `second.on_reply` (they
                     acknowledge urgent reports, decide nothing); a command runs as theirs
                     (/status and /help only)
        a stranger   anyone else: not the obeyed user in the obeyed chat (an update without a
                     sender or
                     a chat, such as one the seam could not read, included): nothing changes,
                     nothing is answered; counted (`coop_telegram_strangers_total`) and summed
                     up in one `door.telegram_strangers` line at most every STRANGERS_LOG_S (how
                     many strangers and updates since the last line; the rest at the stop)
        a tap        a callback query: `handlers.on_tap(update)`
        a reply      a message replying to a message: `handlers.on_reply(update)`
        a command    `/status` `/todos` `/requests` `/quiet` `/help` `/start`
                     (`chief.phone.commands`)
        unblocked    the owner's own chat says the bot is a member again (a `my_chat_member`
                     update: the owner unblocked the bot): `on_member_again()`, so the
                     sender tries the owner's chat at once instead of at its backoff; the
                     second person's or a stranger's says nothing about the owner's chat
        then         its key recorded in chief.db as handled
      the offset     the next poll confirms the batch just handled (its highest id + 1) and
                     nothing else; after an empty poll, a failed one or the start there is
                     nothing to confirm and no offset is sent: Telegram answers from the
                     earliest update it holds unconfirmed, whatever its id. No id floor is
                     kept, so ids that start again lower are never confirmed unread (Telegram
                     confirms every update below an offset, delivered or not).
      empty at once  (a Bot API that does not hold the poll open): the next poll waits for
                     the rest of EMPTY_POLL_MIN_S after this one began, logged once
      on failure     a network error, a 5xx, a timeout: back off (1 s, x1.5, at most 30 s),
                     logged once per outage; a permanent refusal (a bad token): logged once,
                     tried again at 60 s (the ringer names it in the door's status); a 409
                     Conflict (another reader: a second door, `chief telegram pair`): logged
                     once, tried again every 15 s
      a handler that fails   the next offset stops below it: the update comes again (the
                     handlers are idempotent on its key), at most MAX_UPDATE_ATTEMPTS times,
                     then skipped, logged

Who is obeyed is decided once at the start (`DoorConfig.telegram_user_id` and the chat). A crash
between a handler and the record of its key delivers that update again: the handlers (taps and
replies) are idempotent on the update's key (`chief.store.answers`); a command may answer twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import structlog
from telegram import ChatMemberUpdated, Update
from telegram.constants import ChatMemberStatus

from chief.errors import ChiefError, TelegramConflict, TelegramRefused, TelegramUnavailable
from chief.phone.commands import Commands
from chief.phone.commands_text import COMMANDS
from chief.phone.loop import DoorLoop
from chief.telegram.inbound import TelegramPhone
from chief.telegram.update_key import update_key
from plumbing.faults import fault

if TYPE_CHECKING:  # the store loads when the door starts
    from chief.store import InboxState

log = structlog.get_logger("chief.door")

# Telegram holds a poll open this long when nothing arrives (it allows up to 50 s; shorter
# polls cost wakeups, longer ones sit closer to proxies' idle cut-offs).
POLL_TIMEOUT_S = 25.0
# Backoff of a failed poll: from 1 s, x1.5 a failure, capped (as PTB's own polling does).
BACKOFF_FIRST_S = 1.0
BACKOFF_FACTOR = 1.5
BACKOFF_MAX_S = 30.0
# Another reader polls this bot (409): ask again this often, quietly, until it is gone.
CONFLICT_RETRY_S = 15.0
# A 409 comes at once: a poll Telegram has held this long was accepted, the conflict is over.
CONFLICT_OVER_AFTER_S = 2.0
# Telegram refuses the token: no retry cures it until a person acts.
REFUSED_RETRY_S = 60.0
# A handler or chief.db failed on an update: poll it again after this long, this many times.
UPDATE_RETRY_S = 1.0
MAX_UPDATE_ATTEMPTS = 3
# Strangers are summed up in one log line at most this often (a flood is one line, not one per
# sender); the count is in /metrics at once (`coop_telegram_strangers_total`).
STRANGERS_LOG_S = 60.0
# Distinct stranger ids remembered between two lines (past it, new senders are only counted).
MAX_STRANGER_IDS = 10_000
# A poll that comes back empty sooner than this (a Bot API that does not hold it open) is
# followed by the next only once this much has passed since it began: never a hot loop.
EMPTY_POLL_MIN_S = 1.0


@dataclass(frozen=True)
class Pauses:
    """How long the phone waits after each kind of failure (the constants above; tests
    shorten them)."""

    backoff_first_s: float = BACKOFF_FIRST_S
    backoff_max_s: float = BACKOFF_MAX_S
    conflict_s: float = CONFLICT_RETRY_S
    refused_s: float = REFUSED_RETRY_S
    update_retry_s: float = UPDATE_RETRY_S
    strangers_log_s: float = STRANGERS_LOG_S
    empty_poll_s: float = EMPTY_POLL_MIN_S


class UpdateHandlers(Protocol):
    """Taps and text replies from the owner (the door's answers implement it). Each is
    idempotent on the update's key (`chief.telegram.update_key`), never its id alone: a crash
    before the phone records the update delivers it again, and ids repeat."""

    async def on_tap(self, update: Update) -> None: ...
    async def on_reply(self, update: Update) -> None: ...


class InboxStore(Protocol):
    """What the phone keeps in chief.db (`chief.store.ChiefStore`)."""

    async def inbox_state(self) -> InboxState: ...
    async def was_handled(self, update_key: str) -> bool: ...
    async def note_handled(self, update_key: str, update_id: int) -> None: ...
    async def note_stranger(
        self, sender_id: int, chat_id: int | None, update_key: str, update_id: int
    ) -> bool: ...


class PhoneLoop(DoorLoop):
    """The poller task; `run` inside the door's task group, `stop()` to end it promptly."""

    failed_event = "door.phone_failed"

    def __init__(
        self,
        phone: TelegramPhone,
        store: InboxStore,
        *,
        chat_id: int,
        user_id: int,
        commands: Commands,
        handlers: UpdateHandlers | None = None,
        on_stranger: Callable[[], None] = lambda: None,
        on_member_again: Callable[[], None] = lambda: None,
        second: tuple[int, int] | None = None,
        second_handlers: UpdateHandlers | None = None,
        poll_timeout_s: float = POLL_TIMEOUT_S,
        command_list: Sequence[tuple[str, str]] = COMMANDS,
        pauses: Pauses = Pauses(),
    ) -> None:
        self.phone = phone
        self.store = store
        self.chat_id = chat_id
        self.user_id = user_id
        self.commands = commands
        self.handlers = handlers
        self.on_stranger = on_stranger
        #: the owner's chat says the bot is a member again (the ringer's `owner_back`)
        self.on_member_again = on_member_again
        #: the second person's (user id, chat id), and what their taps and replies do
        self.second = second
        self.second_handlers = second_handlers
        self.poll_timeout_s = poll_timeout_s
        self.command_list = command_list
        self.pauses = pauses
        #: the next getUpdates offset: past the batch just handled, to confirm it; None
        #: otherwise (from the earliest update Telegram has not had confirmed, whatever its id)
        self.offset: int | None = None
        #: updates handled (strangers included) since the start
        self.handled = 0
        super().__init__()
        self._poll: anyio.CancelScope | None = None
        self._outage: str | None = None
        self._backoff_s = 0.0
        self._attempts: dict[str, int] = {}  # update key -> failed attempts
        self._last_id: int | None = None  # the last update's id (to notice ids going back)
        self._strangers = StrangerTally()
        self._polls_not_held = False
        self._commands_registered = False
        # The last poll's 409 (another reader, a webhook) in words, until a poll succeeds or
        # Telegram holds one (`conflict`); when the poll in flight began (None: none).
        self._conflict: str | None = None
        self._poll_began: float | None = None

    @property
    def conflict(self) -> str | None:
        """Telegram's last 409 for the door's polls, in words, while it lasts: until a poll
        succeeds, or Telegram has held one for `CONFLICT_OVER_AFTER_S` (a 409 comes at once,
        so a held poll was accepted: the other reader or the webhook is gone)."""
        began = self._poll_began
        if began is not None and anyio.current_time() - began >= CONFLICT_OVER_AFTER_S:
            return None
        return self._conflict

    def stop(self) -> None:
        """End the loop: a poll in flight is cancelled now; an update being handled finishes."""
        if self._poll is not None:
            self._poll.cancel()
        super().stop()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Poll until `stop()`; the strangers not yet summed up get their line at the end."""
        try:
            await super().run(task_status=task_status)
        finally:
            self._strangers_line(at_end=True)

    async def _before_start(self) -> None:
        # No stored offset is sent: Telegram remembers what was confirmed, and a stored floor
        # above ids that started again would confirm (drop) the owner's new updates unread.
        try:
            self._last_id = (await self.store.inbox_state()).last_update_id
        except ChiefError as exc:
            log.error("door.phone_inbox_unread", error=str(exc))

    async def _after_start(self) -> None:
        await self._register_commands()

    def _retry_s(self) -> float:
        return self.pauses.update_retry_s

    async def _register_commands(self, *, quiet: bool = False) -> None:
        """setMyCommands; a failure logged unless `quiet` (an outage already logged)."""
        if self._stopping:
            return
        try:
            with anyio.CancelScope() as scope:
                self._poll = scope  # a stop during start-up cancels this too
                await self.phone.set_commands(self.command_list)
        except TelegramUnavailable as exc:
            if not quiet:
                log.warning("door.phone_commands_unregistered", error=exc.message)
        else:
            if not scope.cancelled_caught:
                self._commands_registered = True
                log.info("door.phone_commands_registered", commands=len(self.command_list))
        finally:
            self._poll = None

    async def _step(self) -> float:
        """One poll and its updates; how long to pause after it (0: poll again at once)."""
        if self._outage is not None and not self._commands_registered:
            # Telegram could not be used at the start (its getMe, say): the menu is registered
            # as soon as it can be, not after the first poll that Telegram holds open.
            await self._register_commands(quiet=True)
        began_s = anyio.current_time()
        with anyio.CancelScope() as scope:
            self._poll, self._poll_began = scope, began_s
            try:
                updates = await self.phone.get_updates(self.offset, self.poll_timeout_s)
            except TelegramUnavailable as exc:
                # A confirmation that may not have reached Telegram is safe to drop: the batch
                # comes again, each update known by its key, and nothing new is confirmed unread.
                self.offset = None
                return self._failed(exc)
            finally:
                self._poll, self._poll_began = None, None
        if scope.cancelled_caught:
            return 0.0
        self._recovered()
        self.offset = _confirming(updates)
        if not updates:
            self._strangers_line()
            return self._paced(anyio.current_time() - began_s)
        for index, update in enumerate(updates):
            if self._stopping:
                break
            if not await self._handle(update):
                self.offset = _confirming(updates[:index], before=updates[index:])
                return self.pauses.update_retry_s
        self._strangers_line()
        return 0.0

    def _failed(self, exc: TelegramUnavailable) -> float:
        """The pause after a failed poll; its outage logged once."""
        pauses = self.pauses
        if isinstance(exc, TelegramConflict):
            kind, pause_s = "conflict", pauses.conflict_s
            self._conflict = exc.message
        elif isinstance(exc, TelegramRefused):
            kind, pause_s = exc.kind, pauses.refused_s
        else:
            self._backoff_s = min(
                pauses.backoff_max_s, self._backoff_s * BACKOFF_FACTOR or pauses.backoff_first_s
            )
            kind, pause_s = "unavailable", max(self._backoff_s, exc.retry_after_s or 0.0)
        if self._outage != kind:
            self._outage = kind
            event = "door.phone_conflict" if kind == "conflict" else "door.phone_unavailable"
            log.warning(event, kind=kind, error=exc.message, retry_in_s=round(pause_s, 3))
        return pause_s

    def _paced(self, took_s: float) -> float:
        """The pause after an empty poll: the rest of `empty_poll_s` when Telegram did not hold
        it open (logged once until a poll is held again)."""
        rest_s = self.pauses.empty_poll_s - took_s
        if rest_s <= 0:
            self._polls_not_held = False
            return 0.0
        if not self._polls_not_held:
            self._polls_not_held = True
            log.warning(
                "door.phone_polls_not_held",
                took_s=round(took_s, 3),
                poll_timeout_s=self.poll_timeout_s,
                next_in_s=round(rest_s, 3),
                hint="the Bot API answers getUpdates at once; the door polls about once a second",
            )
        return rest_s

    def _recovered(self) -> None:
        self._conflict = None
        if self._outage is not None:
            log.info("door.phone_polling_again", after=self._outage)
        self._outage = None
        self._backoff_s = 0.0

    async def _handle(self, update: Update) -> bool:
        """Route one update and record it as handled; False when it must come again."""
        key = update_key(update)
        if await self._was_handled(key):
            # A replay (Telegram delivering it again after a crash, the emulator's replay): the
            # same id and content as an update handled before; nothing again.
            log.info("door.phone_seen_before", update_id=update.update_id)
            return True
        self._went_back(update.update_id)
        user, chat = update.effective_user, update.effective_chat
        who = None if user is None or chat is None else (user.id, chat.id)
        owner = who == (self.user_id, self.chat_id)
        if chat is None or not (owner or (who is not None and who == self.second)):
            await self._stranger(update, key)
            return True
        try:
            await self._route(update, chat.id, owner=owner)
        except Exception as exc:  # a handler's failure must not stop the phone
            attempts = self._attempts.get(key, 0) + 1
            if attempts < MAX_UPDATE_ATTEMPTS:
                self._attempts = {key: attempts}
                log.warning(
                    "door.phone_update_failed",
                    update_id=update.update_id,
                    attempt=attempts,
                    error=str(exc),
                )
                return False
            log.exception("door.phone_update_skipped", update_id=update.update_id, error=str(exc))
        self._attempts = {}
        await self._note(key, update.update_id)
        return True

    async def _was_handled(self, key: str) -> bool:
        try:
            return await self.store.was_handled(key)
        except ChiefError as exc:  # handled as new: the handlers are idempotent on its key
            log.error("door.phone_seen_unread", error=str(exc))
            return False

    def _went_back(self, update_id: int) -> None:
        """Say once, when it happens, that Telegram's update ids went back: nothing is skipped
        for it, but an operator reading the ids in the log should know why they fell."""
        last, self._last_id = self._last_id, update_id
        if last is not None and update_id < last:
            log.warning(
                "door.phone_ids_went_back",
                update_id=update_id,
                previous=last,
                meaning="Telegram's update counter started again (it does after a week without "
                "updates; the emulator does on a restart): every update is still handled",
            )

    async def _route(self, update: Update, chat_id: int, *, owner: bool = True) -> None:
        message = update.message
        if update.callback_query is not None:
            await self._to_handlers("on_tap", update, owner)
        elif message is not None and message.reply_to_message is not None:
            await self._to_handlers("on_reply", update, owner)
        elif message is not None and (message.text or "").startswith("/"):
            await self.commands.run(chat_id, message.text or "", owner=owner)
        elif update.my_chat_member is not None:
            self._member_changed(update.my_chat_member, owner)
        else:
            log.info("door.phone_ignored", update_id=update.update_id)

    def _member_changed(self, changed: ChatMemberUpdated, owner: bool) -> None:
        """The bot's own status changed in a chat: a blocked bot the owner let back in (a
        private chat's `kicked` -> `member`) is worth a send at once."""
        old, new = changed.old_chat_member.status, changed.new_chat_member.status
        log.info("door.phone_bot_status", old=old, new=new, owner=owner)
        if owner and new == ChatMemberStatus.MEMBER and old != ChatMemberStatus.MEMBER:
            self.on_member_again()

    async def _to_handlers(self, method: str, update: Update, owner: bool = True) -> None:
        handlers = self.handlers if owner else self.second_handlers
        if handlers is None:
            log.info("door.phone_unhandled", update_id=update.update_id, kind=method)
            return
        await getattr(handlers, method)(update)

    async def _stranger(self, update: Update, key: str) -> None:
        """Count it and record it as handled: nothing else, no answer; the strangers' line
        says how many came (`_strangers_line`)."""
        self.on_stranger()
        user, chat = update.effective_user, update.effective_chat
        sender_id = user.id if user is not None else (chat.id if chat is not None else 0)
        chat_id = None if chat is None else chat.id
        try:
            new = await self.store.note_stranger(sender_id, chat_id, key, update.update_id)
        except ChiefError as exc:
            log.error("door.phone_seen_failed", error=str(exc))
            new = False
        self._strangers.add(sender_id, new=new)
        self.handled += 1
        self._strangers_line()

    def _strangers_line(self, *, at_end: bool = False) -> None:
        """One line for the strangers since the last one, at most once per
        `pauses.strangers_log_s` (and at the end): a flood is one line, not one per sender."""
        tally, now = self._strangers, time.monotonic()
        if not tally.updates:
            return
        if not at_end and now - tally.logged_at < self.pauses.strangers_log_s:
            return
        log.warning(
            "door.telegram_strangers",
            strangers=tally.distinct(),
            new_strangers=tally.new,
            updates=tally.updates,
            since_s=None if tally.logged_at == -math.inf else round(now - tally.logged_at, 1),
            first_sender_id=tally.first_sender,
        )
        self._strangers = StrangerTally(logged_at=now)

    async def _note(self, key: str, update_id: int) -> None:
        # Recorded in chief.db so that a replay, even after a restart, changes nothing; when
        # chief.db fails the phone goes on (the handlers are idempotent on the update's key,
        # only a command may answer twice should Telegram deliver the update again).
        self.handled += 1
        try:
            with anyio.CancelScope(shield=True):
                await self.store.note_handled(key, update_id)
        except ChiefError as exc:
            log.error("door.phone_seen_failed", error=str(exc))
        fault("door.phone_after_handled")  # test-only: a crash before Telegram hears the offset


def _confirming(handled: Sequence[Update], before: Sequence[Update] = ()) -> int | None:
    """The offset that confirms the `handled` updates and none of those `before` (still to
    come again): past the highest handled id, or at the lowest id still to come. None when
    there is nothing to confirm (or the offset would not be positive: Telegram reads a
    negative one as "the last N")."""
    if before:
        offset = min(update.update_id for update in before)
    elif handled:
        offset = max(update.update_id for update in handled) + 1
    else:
        return None
    return offset if offset > 0 else None


@dataclass
class StrangerTally:
    """The strangers since the last strangers' line: their updates, the distinct senders (at
    most MAX_STRANGER_IDS remembered, so a flood costs bounded memory), the new ones."""

    logged_at: float = -math.inf  # monotonic seconds of the last line; none yet: log at once
    updates: int = 0
    new: int = 0
    first_sender: int | None = None
    senders: set[int] = field(default_factory=set)
    more_senders: int = 0  # distinct senders past the remembered ones (counted, not exact)

    def add(self, sender_id: int, *, new: bool) -> None:
        self.updates += 1
        self.new += int(new)
        if self.first_sender is None:
            self.first_sender = sender_id
        if sender_id in self.senders:
            return
        if len(self.senders) < MAX_STRANGER_IDS:
            self.senders.add(sender_id)
        elif new:
            self.more_senders += 1

    def distinct(self) -> int:
        return len(self.senders) + self.more_senders
