"""The phone's ask task: the edits settles owe, performed durably, and `reask`.

An ask (a notify row with `ask`) is queued with its button tokens in its report's transaction
and rung alone with its buttons by the sender task (`chief.phone.ringer`), which remembers its
(chat, message id) in the transaction of its sent mark. A settle (a row with `settles:
{request_id, key}`) voids the buttons of the ask with that key and, in the same transaction,
queues one edit per message that rang it: its text plus the settling row's, its buttons
removed (`chief.store.asks`).
An ask is known by its key, never by the request's id alone: ids come back (a fresh coop.db, a
restored backup, a second ledger behind this door), keys never do. This task performs
those edits:

    loop:
      due edits        none: sleep until nudged (a settle was accepted) or the next is due
      edit             Telegram's editMessageText, bounded by TELEGRAM_TIMEOUT_S
      done             off the queue; so is an edit Telegram calls moot ("message is not
                       modified": it already reads so; "message to edit not found": it is gone)
      failed           deferred with the sender's backoff (or Telegram's Retry-After), at most
                       MAX_EDIT_ATTEMPTS tries; then given up, logged (`door.ask_edit_abandoned`):
                       the buttons are void in chief.db either way, a tap on them changes nothing

A door killed after a settle committed and before its edit finds the edit queued at its next
start. An edit repeated (its answer lost) is moot the second time.

`reask(request)` (the phone's `/requests`) rings an open request again as an ask with its live
buttons, minting them when this chief.db never saw the request; the message it rings is the
request's newest ask message, and the older ones keep working while the tokens live.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import structlog

from chief.errors import ChiefError, ChiefInputError, TelegramUnavailable
from chief.model import ASK_KEY_PATTERN, Ask, choices_refusal
from chief.phone.loop import DoorLoop
from chief.phone.pacing import backoff_s
from plumbing.faults import fault

if TYPE_CHECKING:  # the store loads when the door starts
    from chief.store import AskEdit

log = structlog.get_logger("chief.door")

# Edits read per turn of the loop.
EDIT_BATCH = 32
# An edit that failed this many times is given up (about eight minutes at the backoff cap).
MAX_EDIT_ATTEMPTS = 12
# After chief.db could not be read, or any other failure of a turn, try again after this long.
RETRY_S = 1.0


class AskStore(Protocol):
    """What the ask task needs of the Chief's store (`chief.store.ChiefStore`)."""

    async def queue_ask(self, ask: Ask, text: str) -> tuple[int, int]: ...
    async def due_ask_edits(self, now: float, limit: int) -> list[AskEdit]: ...
    async def next_ask_edit_at(self) -> float | None: ...
    async def ask_edit_done(self, seq: int) -> None: ...
    async def defer_ask_edit(self, seq: int, next_attempt_at: float, error: str) -> None: ...


class AskEditor(Protocol):
    """Telegram's edit of a settled ask (`chief.telegram.sender.BotSender.edit`): the text
    replaced, the buttons removed; returns when done or moot, else raises
    `TelegramUnavailable`."""

    async def edit(self, chat_id: int | str, message_id: int, text: str) -> None: ...


class Nudgeable(Protocol):
    def nudge(self) -> None: ...


def ask_text(request: Mapping[str, Any]) -> str:
    """The text an ask rung again shows: `request #7: order the bigger bag? (approve /
    decline)`."""
    text = f"request #{request['id']}: {request['title']}"
    choices = request.get("choices") or []
    return f"{text} ({' / '.join(choices)})" if choices else text


def ask_of(request: Mapping[str, Any]) -> Ask:
    """The ask of a request as the ledger lists it (`id`, `ask_key`, `title`, `choices`);
    ChiefInputError for one the door could not ring (one without an ask key was never asked:
    the door knows an ask by its key, never by the request's id alone)."""
    request_id, title = request.get("id"), request.get("title")
    key = request.get("ask_key")
    choices = request.get("choices") or []
    if not isinstance(request_id, int) or isinstance(request_id, bool) or request_id < 1:
        raise ChiefInputError(f"a request's id is a positive integer, not {request_id!r}")
    if not isinstance(key, str) or re.fullmatch(ASK_KEY_PATTERN, key) is None:
        raise ChiefInputError(f"request #{request_id} has no ask key: it was never asked")
    if not isinstance(title, str) or not title:
        raise ChiefInputError(f"request #{request_id} has no title")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ChiefInputError(f"request #{request_id}'s choices are not a list of labels")
    refusal = choices_refusal(choices)
    if refusal is not None:
        raise ChiefInputError(f"request #{request_id}: {refusal}")
    return Ask(request_id, key, title, tuple(choices))


class Asks(DoorLoop):
    """The ask task (`run` inside the door's task group) and `reask`."""

    failed_event = "door.ask_edits_failed"

    def __init__(
        self,
        store: AskStore,
        editor: AskEditor,
        ringer: Nudgeable,
        *,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.editor = editor
        self.ringer = ringer
        self._wall_clock = wall_clock
        super().__init__()
        #: edits done (or moot) and given up by this run
        self.edits_done = 0
        self.edits_abandoned = 0

    async def reask(self, request: dict[str, Any]) -> None:
        """Ring `request` (as the ledger lists it: `id`, `ask_key`, `title`, `choices`) again
        as an ask with its live buttons. Raises ChiefInputError for a request the door cannot
        ring and ChiefError when chief.db could not queue it."""
        ask = ask_of(request)
        seq, _ = await self.store.queue_ask(ask, ask_text(request))
        log.info("door.reasked", request_id=ask.request_id, ask_key=ask.key, seq=seq)
        self.ringer.nudge()

    def _retry_s(self) -> float:
        return RETRY_S

    async def _step(self) -> float:
        """One turn: perform the due edits; how long to pause after it."""
        now = self._wall_clock().timestamp()
        try:
            edits = await self.store.due_ask_edits(now, EDIT_BATCH)
            if not edits:
                due_at = await self.store.next_ask_edit_at()
                return math.inf if due_at is None else max(0.0, due_at - now)
        except ChiefError as exc:
            log.error("door.ask_edits_failed", error=str(exc))
            return RETRY_S
        for edit in edits:
            if self._stopping:
                break
            await self._perform(edit)
        return 0.0

    async def _perform(self, edit: AskEdit) -> None:
        bound = log.bind(
            request_id=edit.request_id,
            ask_key=edit.ask_key,
            telegram_message_id=edit.message_id,
            attempt=edit.attempts + 1,
        )
        fault("door.before_ask_edit")  # test-only: the door dies between a settle and its edit
        try:
            await self.editor.edit(edit.chat_id, edit.message_id, edit.text)
        except TelegramUnavailable as exc:
            await self._failed(edit, exc, bound)
            return
        # Telegram has the edit: record it even if the door is stopping.
        with anyio.CancelScope(shield=True):
            await self.store.ask_edit_done(edit.seq)
        self.edits_done += 1
        bound.info("door.ask_edited")

    async def _failed(self, edit: AskEdit, exc: TelegramUnavailable, bound: Any) -> None:
        attempts = edit.attempts + 1
        if attempts >= MAX_EDIT_ATTEMPTS:
            bound.error("door.ask_edit_abandoned", error=exc.message)
            self.edits_abandoned += 1
            await self.store.ask_edit_done(edit.seq)
            return
        wait_s = max(backoff_s(attempts), exc.retry_after_s or 0.0)
        bound.warning("door.ask_edit_failed", error=exc.message, retry_in_s=round(wait_s, 3))
        next_at = self._wall_clock().timestamp() + wait_s
        await self.store.defer_ask_edit(edit.seq, next_at, exc.message)
