"""The phone's Telegram sender task: it drains the durable Telegram queue in chief.db, in order.

    loop:
      a send in doubt, unrecorded?  record it first (at start: each send the last run left in
                                   flight is one in-doubt event)
      a sent-but-unmarked message?  write its mark first (a full disk must not ring twice)
      the queue's head             none: sleep until nudged; each chat's first entry in turn
                                   (the owner's, a ladder's second chat: neither waits
                                   behind the other), the first ready rings
                                   deferred: sleep until its next attempt
      a token of the chat's bucket none free: sleep until one is (entries pile up meanwhile)
      compose                      one entry alone, or a digest of as many as fit (pacing.py);
                                   a group in doubt alone, the same entries, behind the marker;
                                   an ask always alone, with its live buttons (one per choice);
                                   an urgent ring always alone, with its live "Got it", and
                                   never silent (chief.phone.urgent); a ladder's rung 2 in
                                   the second person's chat (the entry's `chat`), paced by
                                   that chat's own bucket
      in flight                    the carried entries' send id, committed (FULL) before the send
      send                         awaited up to the late-reply bound (telegram.sender); silently in
                                   quiet hours and while the owner's /quiet holds; under the row
                                   locks of every entry it carries
      mark                         every carried row sent with the message's id and off the
                                   queue, one transaction, shielded from cancellation; an ask's
                                   (chat, message id) remembered against its request in it
      on failure                   nothing rang: the carried entries deferred (backoff, or
                                   Telegram's own Retry-After when longer); the head waits
      in doubt                     the request went out, no answer came: one in-doubt event,
                                   recorded; the same entries ring once more after the backoff,
                                   as one group, marked as a possible repeat
      on a permanent refusal       (a bad token, an unknown chat, a bot the owner blocked) the
                                   same, at the backoff cap, logged once until a send goes
                                   through (`door.telegram_refused`, with what to do)
      the owner unblocked the bot  (their chat's `my_chat_member` says member again:
                                   chief.phone.updater calls `owner_back`) the owner's chat
                                   rings at once, not at its backoff (a token still needed)

The queue is durable, so a restart resumes it. A late reply is not a lost one: a send past the
door's deadline (`TELEGRAM_TIMEOUT_S`, `slow_after_s` here) shows as slow in the status and is
still awaited; its answer marks its rows. A row rings again only after an in-doubt event that
carried it, once per event: the door died (or a stop cancelled the send) between the send and
the mark (known at the start from the in-flight record, not guessed), the connection dropped
after the request went out, or the late-reply bound passed.

A notify waits for its own ring only briefly (`ring_wait`), and only when it could ring at once:
the sender is not backing off, no entry is ahead of it, and a token is free. Otherwise the door
answers "telegram": "queued" at once, so Telegram never holds back the engine's FIFO.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import structlog

from chief.errors import ChiefError, TelegramRefused, TelegramUnavailable
from chief.phone.commands_text import QuietOverride
from chief.phone.locks import KeyedLocks
from chief.phone.loop import DoorLoop
from chief.phone.pacing import (
    BACKOFF_MAX_S,
    QuietHours,
    TokenBucket,
    backoff_s,
    compose,
    keyboard_rows,
    pacing_for,
)
from chief.telegram.sender import ChatMove, TelegramSender, send_options
from chief.urgent_rules import GOT_IT
from plumbing.faults import fault

if TYPE_CHECKING:  # the store loads when the door starts
    from chief.store import InDoubt, QueuedRing

log = structlog.get_logger("chief.door")

# How long a notify waits for its own ring before answering "queued"; a local or healthy Bot API
# answers in milliseconds.
RING_WAIT_S = 1.0
# After a failed sent mark (chief.db), the sender retries the mark alone, this often.
MARK_RETRY_S = 1.0
# After the queue could not be read (chief.db), or any other failure of a turn, the sender tries
# again after this long.
READ_RETRY_S = 1.0
# While Telegram cannot be used (the sender's getMe failed or could not be read) and nothing is
# queued, the sender asks again this often, so the door's status clears without a send.
UNUSABLE_RETRY_S = 30.0
# A send still unanswered after this long shows as slow (the door's TELEGRAM_TIMEOUT_S).
DEFAULT_SLOW_AFTER_S = 10.0
# Why the sends found in flight at the start are in doubt.
RESTART_DOUBT = "the door stopped between a send and its sent mark; the send may have rung"


class RingQueue(Protocol):
    """What the sender task needs of the Chief's store (`chief.store.ChiefStore`)."""

    async def telegram_head(self, limit: int) -> list[QueuedRing]: ...
    async def mark_rung(
        self,
        seqs: list[int],
        outbox_ids: list[str],
        telegram_message_id: int | None,
        chat_id: int | str | None = None,
    ) -> None: ...
    async def defer_rings(self, seqs: list[int], next_attempt_at: float, error: str) -> None: ...
    async def begin_send(self, seqs: list[int], send_id: str) -> None: ...
    async def record_doubts(self, reason: str, next_attempt_at: float | None) -> list[InDoubt]: ...


@dataclass(frozen=True)
class Rung:
    """A message Telegram took: its id, None when its answer could not be read."""

    telegram_message_id: int | None


@dataclass
class _Unmarked:
    seqs: list[int]
    outbox_ids: list[str]
    telegram_message_id: int | None
    chat_id: int | str | None = None  # set when the message rang an ask: it is remembered


@dataclass
class _Ring:
    event: anyio.Event = field(default_factory=anyio.Event)
    rung: Rung | None = None
    waiters: int = 0


class Ringer(DoorLoop):
    """The sender task and what notifies ask of it; `run` inside the door's task group."""

    failed_event = "door.sender_failed"

    def __init__(
        self,
        queue: RingQueue,
        sender: TelegramSender,
        *,
        chat_id: str,
        quiet_hours: QuietHours | None = None,
        quiet: QuietOverride | None = None,
        slow_after_s: float = DEFAULT_SLOW_AFTER_S,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.queue = queue
        self.sender = sender
        self.chat_id = chat_id
        self.quiet_hours = quiet_hours
        #: the owner's /quiet (chief.phone.updater sets it): silent while it holds
        self.quiet = quiet or QuietOverride()
        self.slow_after_s = slow_after_s
        self._wall_clock = wall_clock
        self._monotonic = monotonic
        burst, interval_s = pacing_for(chat_id)
        # One bucket per chat; the door has one chat today, the table keeps the rule per chat.
        self._buckets = {chat_id: TokenBucket(burst, interval_s, monotonic())}
        self.locks = KeyedLocks()
        self._rings: dict[int, _Ring] = {}
        super().__init__()
        self._backing_off = False
        # An outage of failed sends, logged once when it starts and once when a send goes
        # through again (a minute-long backoff still made one line per try an hour of lines):
        # (sends failed, monotonic time of the first).
        self._outage: tuple[int, float] | None = None
        self.unmarked: _Unmarked | None = None
        #: called after an ask rang (the nag task's nudge: its reminders may be scheduled)
        self.ask_rung: Callable[[], None] = lambda: None
        #: the last failed send, for the door's status; None once a send succeeds
        self.failure: TelegramUnavailable | None = None
        self.sent_messages = 0
        #: in-doubt events this run recorded (chief.db keeps every run's: the status shows those)
        self.in_doubt_events = 0
        # (reason, next attempt) of sends in doubt not recorded yet: at the start, whatever the
        # last run left in flight.
        self._doubt: tuple[str, float | None] | None = (RESTART_DOUBT, None)
        self._sending_since: float | None = None
        #: called once an urgent ring is marked sent (`chief.phone.urgent.Urgent.rung`)
        self.urgent_rung: Callable[[], None] = lambda: None
        # The owner's chat said the bot is a member again: its head rings without waiting out
        # its backoff (`owner_back`), once.
        self._owner_back = False
        # When an idle sender next asks again whether Telegram can be used (its getMe).
        self._probe_at = monotonic() + UNUSABLE_RETRY_S

    @property
    def last_error(self) -> str | None:
        """The last failed send's words, else why Telegram cannot be used (the sender's getMe
        failed or could not be read), for the door's status."""
        if self.failure is not None:
            return self.failure.message
        problem = self._sender_problem()
        return None if problem is None else problem.message

    def _sender_problem(self) -> TelegramUnavailable | None:
        # Only the real sender (`BotSender.problem`) knows its getMe; a double has no problem.
        problem = getattr(self.sender, "problem", None)
        return problem if isinstance(problem, TelegramUnavailable) else None

    @property
    def chat_moved(self) -> ChatMove | None:
        """The group Telegram made a supergroup, followed by the real sender
        (`BotSender.moved`); a double never moves."""
        moved = getattr(self.sender, "moved", None)
        return moved if isinstance(moved, ChatMove) else None

    @property
    def refusal(self) -> TelegramRefused | None:
        """Telegram's permanent refusal of the last send (a bad token, an unknown chat, a bot
        the owner blocked), until a send goes through."""
        return self.failure if isinstance(self.failure, TelegramRefused) else None

    # -- what a notify asks ----------------------------------------------------------------

    def can_ring_now(self, ahead: int) -> bool:
        """Whether an entry with `ahead` entries before it would ring at once."""
        bucket = self._buckets[self.chat_id]
        return (
            ahead == 0
            and not self._backing_off
            and self.unmarked is None
            and bucket.wait_s(self._monotonic()) == 0.0
        )

    def sending_s(self) -> float | None:
        """How long the send in flight has waited for Telegram (None: no send in flight)."""
        since = self._sending_since
        return None if since is None else max(0.0, self._monotonic() - since)

    def unmarked_ring(self, outbox_id: str) -> Rung | None:
        """The message that carried `outbox_id` when its mark has not been written yet."""
        if self.unmarked is not None and outbox_id in self.unmarked.outbox_ids:
            return Rung(self.unmarked.telegram_message_id)
        return None

    async def ring_wait(self, seq: int, ahead: int, timeout_s: float = RING_WAIT_S) -> Rung | None:
        """Nudge the sender; when the entry could ring at once, wait up to `timeout_s` for it.
        The message that carried it, or None (still queued)."""
        return (await self.ring_wait_many([(seq, ahead)], timeout_s))[0]

    async def ring_wait_many(
        self, entries: list[tuple[int, int]], timeout_s: float = RING_WAIT_S
    ) -> list[Rung | None]:
        """`ring_wait` for the entries of one notify batch, `(seq, entries ahead)` each: nudge
        the sender and, when the earliest of them could ring at once, wait up to `timeout_s`
        for the message that carries it (a digest carries the ones queued with it). Each entry
        answers the message that carried it by then, or None (still queued)."""
        if not entries:
            return []
        first_seq, first_ahead = min(entries)
        if not self.can_ring_now(first_ahead):
            self.nudge()
            return [None] * len(entries)
        rings = [self._rings.setdefault(seq, _Ring()) for seq, _ in entries]
        for ring in rings:
            ring.waiters += 1
        try:
            self.nudge()
            with anyio.move_on_after(timeout_s):
                await self._rings[first_seq].event.wait()
            return [ring.rung for ring in rings]
        finally:
            for (seq, _), ring in zip(entries, rings, strict=True):
                ring.waiters -= 1
                if ring.waiters == 0 and self._rings.get(seq) is ring:
                    del self._rings[seq]

    def owner_back(self) -> None:
        """The owner let the bot back into their chat (they unblocked it): the owner's chat
        is tried at once, not at the backoff a refused send left it at."""
        self._owner_back = True
        self.nudge()

    # -- the task --------------------------------------------------------------------------

    def _retry_s(self) -> float:
        return READ_RETRY_S

    async def _step(self) -> float:
        """One turn of the loop; how long to pause after it (0: go on at once)."""
        if self._doubt is not None:
            return 0.0 if await self._record_doubt(*self._doubt) else MARK_RETRY_S
        if self.unmarked is not None:
            return 0.0 if await self._mark(self.unmarked) else MARK_RETRY_S
        try:
            head = await self.queue.telegram_head(256)
        except ChiefError as exc:
            log.error("door.telegram_queue_failed", error=str(exc))
            return READ_RETRY_S
        if not head:
            self._backing_off = False
            self._owner_back = False
            return await self._ask_again_if_unusable()
        # Each chat's queue in its own order: a ladder's ring in the second person's chat (rung
        # 2, at the head: `chief.store.telegram.head`) never waits behind the owner's chat
        # backing off (refused, unreachable), nor the owner's behind it.
        waits = []
        for first in chat_heads(head):
            chat = first.chat or self.chat_id
            due_in_s = first.next_attempt_at - self._wall_clock().timestamp()
            if first.chat is None and self._owner_back:
                due_in_s = 0.0
            bucket = self._bucket(chat)
            ready_in_s = max(due_in_s, bucket.wait_s(self._monotonic()))
            if ready_in_s > 0:
                waits.append(ready_in_s)
                continue
            if first.chat is None:
                self._backing_off = False
                self._owner_back = False
            bucket.take(self._monotonic())
            owners = [entry for entry in head if entry.chat is None]
            return await self._ring(owners if first.chat is None else [first])
        return min(waits)

    def _bucket(self, chat: str) -> TokenBucket:
        """The token bucket of `chat` (the owner's, or a ladder's second chat)."""
        bucket = self._buckets.get(chat)
        if bucket is None:
            burst, interval_s = pacing_for(chat)
            bucket = self._buckets[chat] = TokenBucket(burst, interval_s, self._monotonic())
        return bucket

    async def _ask_again_if_unusable(self) -> float:
        """With nothing queued: while Telegram cannot be used, ask again (getMe) every
        UNUSABLE_RETRY_S; else sleep until nudged."""
        if self._sender_problem() is None:
            return math.inf
        due_in_s = self._probe_at - self._monotonic()
        start = getattr(self.sender, "start", None)
        if due_in_s > 0 or start is None:
            return max(due_in_s, 0.0) or UNUSABLE_RETRY_S
        self._probe_at = self._monotonic() + UNUSABLE_RETRY_S
        await start()  # never raises; logs a change of cause once
        return math.inf if self._sender_problem() is None else UNUSABLE_RETRY_S

    async def _ring(self, head: list[QueuedRing]) -> float:
        carried, text = next_message(head)
        seqs = [entry.seq for entry in carried]
        outbox_ids = [entry.outbox_id for entry in carried if entry.outbox_id is not None]
        # An urgent ring is loud through the quiet hours and the owner's /quiet (issue 28).
        silent = carried[0].urgent is None and self._silent()
        repeat = carried[0].repeat_of is not None
        asked = carried[0].ask_key
        # A ladder's ring in another chat than the owner's (rung 2): sent there, marked there.
        other_chat = carried[0].chat
        bound = log.bind(delivery_keys=outbox_ids, entries=len(carried), repeat=repeat)
        if other_chat is not None:
            bound = bound.bind(chat=other_chat, urgent_key=carried[0].urgent)
        if asked is not None:
            bound = bound.bind(ask_key=asked)
        try:
            # The in-flight record: a death from here to the mark is known at the next start.
            await self.queue.begin_send(seqs, uuid.uuid4().hex)
        except ChiefError as exc:
            log.error("door.telegram_queue_failed", error=str(exc))
            return READ_RETRY_S
        async with self._hold(outbox_ids):
            try:
                telegram_id = await self._send(
                    text,
                    silent,
                    bound,
                    ask_buttons(carried),
                    carried[0].reply_to_message_id,
                    other_chat,
                )
            except TelegramUnavailable as exc:
                if exc.in_doubt:
                    await self._in_doubt(carried, exc)
                else:
                    await self._defer(carried, exc, bound)
                self._answer_waiters(seqs, None)  # they answer "queued" now, not at their bound
                return 0.0
            fault("door.after_telegram_send")
            if other_chat is not None:
                fault("door.after_ladder_send")  # test-only: rung 2 sent, not marked
            self.sent_messages += 1
            self.failure = None  # a send went through: a permanent refusal included
            self._end_outage(bound)
            bound.info("door.rung", telegram_message_id=telegram_id, silent=silent)
            # Telegram has the message: record it even if the door is stopping. An ask whose
            # message id could not be read is not remembered: no edit can name it.
            with anyio.CancelScope(shield=True):
                remembered = (asked or carried[0].urgent) is not None and telegram_id is not None
                chat = chat_key(other_chat or self.chat_id) if remembered else None
                await self._mark(_Unmarked(seqs, outbox_ids, telegram_id, chat))
        if other_chat is not None:
            fault("door.after_ladder_mark")  # test-only: rung 2 sent and marked
        if carried[0].urgent is not None:
            self.urgent_rung()
        self._answer_waiters(seqs, Rung(telegram_id))
        if asked is not None:
            self.ask_rung()  # its reminders may have been scheduled with its sent mark
        return 0.0

    def _silent(self) -> bool:
        """Send without a sound: inside the quiet hours, or while the owner's /quiet holds."""
        now = self._wall_clock()
        in_hours = self.quiet_hours is not None and self.quiet_hours.is_quiet(now)
        return in_hours or self.quiet.holds(now.timestamp())

    async def _send(
        self,
        text: str,
        silent: bool,
        bound: Any,
        buttons: list[list[tuple[str, str]]] | None,
        reply_to: int | None = None,
        chat: str | None = None,
    ) -> int | None:
        """The send, timed: one past the door's deadline is logged as slow when it ends."""
        started = self._sending_since = self._monotonic()
        try:  # `buttons` for an ask or an urgent ring, `reply_to` for a reminder, `chat` rung 2
            options = send_options(buttons, reply_to, None if chat is None else chat_key(chat))
            return await self.sender.send(text, silent=silent, **options)
        finally:
            self._sending_since = None
            waited_s = self._monotonic() - started
            if waited_s > self.slow_after_s:
                bound.warning(
                    "door.send_slow", waited_s=round(waited_s, 3), deadline_s=self.slow_after_s
                )

    def _end_outage(self, bound: Any) -> None:
        if self._outage is not None:
            failed, since = self._outage
            self._outage = None
            bound.info(
                "door.send_recovered",
                failed_sends=failed,
                outage_s=round(self._monotonic() - since, 3),
            )

    async def _in_doubt(self, carried: list[QueuedRing], exc: TelegramUnavailable) -> None:
        """The request went out and no answer came: one in-doubt event; the same entries ring
        again after the backoff, as one group, marked."""
        wait_s = backoff_s(carried[0].attempts + 1)
        self._backing_off = True
        self.failure = exc
        await self._record_doubt(exc.message, self._wall_clock().timestamp() + wait_s)

    async def _record_doubt(self, reason: str, next_attempt_at: float | None) -> bool:
        """Record every send in flight as in doubt; on a chief.db failure keep it to record
        before anything else rings (else its rows would ring again unmarked, uncounted)."""
        try:
            events = await self.queue.record_doubts(reason, next_attempt_at)
        except ChiefError as exc:
            self._doubt = (reason, next_attempt_at)
            log.error("door.telegram_queue_failed", error=str(exc))
            return False
        self._doubt = None
        for event in events:
            self.in_doubt_events += 1
            log.warning(
                "door.send_in_doubt",
                send_id=event.send_id,
                delivery_keys=event.outbox_ids,
                entries=len(event.seqs),
                reason=reason,
            )
        return True

    def _answer_waiters(self, seqs: list[int], rung: Rung | None) -> None:
        for seq in seqs:
            ring = self._rings.get(seq)
            if ring is not None:
                ring.rung = rung
                ring.event.set()

    def _hold(self, outbox_ids: list[str]) -> _Holding:
        return _Holding(self.locks, outbox_ids)

    async def _defer(self, carried: list[QueuedRing], exc: TelegramUnavailable, bound: Any) -> None:
        attempts = carried[0].attempts + 1
        wait_s = max(backoff_s(attempts), exc.retry_after_s or 0.0)
        self._backing_off = True
        known = self.refusal
        self.failure = exc
        if isinstance(exc, TelegramRefused):
            # No retry cures it until a person acts: try again only at the backoff cap, and
            # say so once (with what to do), not once per try.
            wait_s = max(wait_s, BACKOFF_MAX_S)
            if known is None or known.kind != exc.kind:
                bound.error(
                    "door.telegram_refused",
                    kind=exc.kind,
                    answer=exc.answer,
                    action=exc.action,
                    retry_in_s=round(wait_s, 3),
                    attempt=attempts,
                )
        elif self._outage is None:
            self._outage = (1, self._monotonic())
            bound.warning(
                "door.send_failed",
                error=exc.message,
                retry_after_s=exc.retry_after_s,
                retry_in_s=round(wait_s, 3),
                attempt=attempts,
                note="logged once per outage; door.send_recovered says when it ends",
            )
        else:
            self._outage = (self._outage[0] + 1, self._outage[1])
        next_at = self._wall_clock().timestamp() + wait_s
        try:
            await self.queue.defer_rings([entry.seq for entry in carried], next_at, exc.message)
        except ChiefError as store_exc:
            log.error("door.telegram_queue_failed", error=str(store_exc))

    async def _mark(self, sent: _Unmarked) -> bool:
        try:
            if sent.chat_id is None:
                await self.queue.mark_rung(sent.seqs, sent.outbox_ids, sent.telegram_message_id)
            else:
                await self.queue.mark_rung(
                    sent.seqs, sent.outbox_ids, sent.telegram_message_id, sent.chat_id
                )
        except ChiefError as exc:
            # Sent, not marked: kept here and marked before anything else rings, so a full disk
            # never rings the phone twice. Only a crash loses it.
            self.unmarked = sent
            log.error(
                "door.mark_failed",
                delivery_keys=sent.outbox_ids,
                telegram_message_id=sent.telegram_message_id,
                error=str(exc),
            )
            return False
        self.unmarked = None
        return True


def next_message(head: list[QueuedRing]) -> tuple[list[QueuedRing], str]:
    """The entries the next message carries, from the head, and its text: an ask alone (a
    repeat of it behind the repeat marker); a group in doubt alone and whole (never grown),
    behind the repeat marker; else as many fresh entries as fit one message (none in doubt,
    no ask: those wait at the head)."""
    group = head[0].repeat_of
    if head[0].ask_key is not None or head[0].urgent is not None:
        return head[:1], compose([head[0].text], repeat=group is not None)[1]
    same = list(
        itertools.takewhile(
            lambda entry: (
                entry.repeat_of == group and entry.ask_key is None and entry.urgent is None
            ),
            head,
        )
    )
    count, text = compose([entry.text for entry in same], repeat=group is not None)
    return same[:count], text


def chat_heads(head: list[QueuedRing]) -> list[QueuedRing]:
    """The first entry of each chat in `head` (None: the owner's), in queue order."""
    seen: set[str | None] = set()
    firsts = []
    for entry in head:
        if entry.chat not in seen:
            seen.add(entry.chat)
            firsts.append(entry)
    return firsts


def ask_buttons(carried: list[QueuedRing]) -> list[list[tuple[str, str]]] | None:
    """The inline keyboard of a message that carries an ask with live buttons, or an urgent
    ring with its live "Got it" (on a row of its own, below an urgent request's choices), else
    None."""
    if len(carried) != 1:
        return None
    entry = carried[0]
    rows = keyboard_rows(entry.buttons) if entry.ask_key is not None else []
    if entry.got_it is not None:
        rows.append([(GOT_IT, entry.got_it)])
    return rows or None


def chat_key(chat_id: str) -> int | str:
    """The configured chat as Telegram names it in a message: an integer id, or an @name."""
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


class _Holding:
    """The per-row locks of every row one message carries, held from the send to the mark."""

    def __init__(self, locks: KeyedLocks, keys: list[str]) -> None:
        self._locks = locks
        self._keys = keys
        self._stack: contextlib.AsyncExitStack | None = None

    async def __aenter__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        for key in self._keys:
            await self._stack.enter_async_context(self._locks.hold(key))

    async def __aexit__(self, *exc: object) -> None:
        assert self._stack is not None
        await self._stack.aclose()
