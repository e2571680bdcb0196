"""chief.db: the only package that speaks SQL, and only SQL and transactions.

Modules: `schema` (the migrations, the connection's pragmas), `reports` (chiefs, messages, the
report outbox), `telegram` (the door's queue, its in-doubt events, the sent marks), `asks` (the
requests rung with buttons: their tokens, their messages, the edits their settles owe), `inbox`
(the door's phone: the update offset, the /quiet override, the strangers), `answers` (the
owner's answers from the phone), `reminders` (an ask's reminders' schedule), `urgent` (the
urgent reports), `fallback` (the fallback channel's outages and sends), `sql` (the transaction
and small reads). What a report does with these transactions (accept, then land
when the caller may, in one hop) is the use case of chief.landing.

Tables (schema version in PRAGMA user_version, migrated on open):

    chiefs               one Master Chief conversation per owner; created on first use, and a
                         trigger refuses DELETE (the conversation is never trashed)
    messages             the conversation; `external_request_id` UNIQUE is the report key
    chief_report_outbox  one row per report key; `message_id`/`landed_at` set when it lands
    coop_notify_sent     the notify door's record of which Coop outbox rows rang Telegram
    telegram_queue       what the door's sender task still has to ring, in order (seq); a row
                         is queued in the report's transaction and leaves in its sent mark's.
                         `send_id` is the in-flight record: written (FULL) before a send that
                         carries the entry, cleared when the send failed; an entry still
                         carrying one at the door's start was sent or not, nobody knows.
                         `repeat_of` names the in-doubt send the entry rings again with, as one
                         group, marked as a possible repeat
    telegram_doubts      the in-doubt events, one row per entry each carried: a send whose
                         outcome the door could not know (it died between send and mark, the
                         answer was lost, the late-reply bound passed); kept as the record an
                         operator and the proof suite compare the repeats with
    asks, ask_buttons, ask_messages, ask_edits
                         requests to the owner rung alone with buttons (`chief.store.asks`)
    ask_reminders        an ask's reminders: the next due time, how many rang, the message
                         each replies to (`chief.store.reminders`)
    telegram_inbox       one row: the id of the last update the door's phone handled (to
                         notice when Telegram's ids go back; it filters nothing) and the
                         owner's /quiet override (unix seconds it holds until)
    telegram_updates_seen
                         the keys (id and content digest) of the updates the phone handled,
                         recorded after each: a replay is applied once (the last
                         inbox.MAX_SEEN kept)
    telegram_strangers   senders the phone does not obey, each counted (at most
                         inbox.MAX_STRANGERS, the longest unseen forgotten first)
    fallback_outages, fallback_sends
                         the Telegram outages the door saw and each message owed to the
                         fallback channel, with its in-flight record (`chief.store.fallback`)
    telegram_answers     the owner's answers from the phone, one per tap or reply that became
                         one: recorded (FULL) before the tap is acknowledged, `pending` until
                         the ledger answers, then `applied` or `refused`; `update_key`
                         UNIQUE (a replayed update finds its row; a new one under an old
                         id does not)

Durability: WAL with synchronous=FULL, so a report the door accepted survives power loss, not
only a process crash (NORMAL would only survive the latter). One exception, the landing: its
commit runs with synchronous=NORMAL (no fsync of its own; the next FULL commit, such as the
door's sent mark a Telegram round trip later, makes it durable with everything before it). A
power cut can only lose a landing whose outbox row is durable and still reads "not landed",
so the next start lands it again, in order, once. It saves one fsync per report (~0.3 ms on
this machine's disk, and more while other writers share it).

Thread hops: one plain sqlite3 connection on one thread of its own (`plumbing.db_thread`, on
public APIs: a `threading.Thread`, a `queue.SimpleQueue` of calls, and the event loop's
`call_soon_threadsafe` to wake the caller's `anyio.Event`). Each method below is ONE hop: the
whole transaction runs as one function on that thread, so no other task's statement can
interleave with it. A hop, once started, is never abandoned: a cancelled caller returns after
its transaction is over (whole), and a caller cancelled while it waits for its turn runs
nothing. The notifier's `Database` hops the same way.
`in_one_hop(plan, ...)` runs a use case's several transactions in one hop (`Transactions`):
the report, the door's hot path, runs its accept transaction (the sent-mark reads, the report
rows and, for the door, their Telegram queue entries: one FULL commit, so a crash right after it
still has both) and, when the caller may land, the landing transaction, as one hop.
The Telegram queue's use cases (read the head, write a send's in-flight record before it goes
out, mark a message's rows sent and take them off the queue in one transaction, defer, record
the sends in doubt) are one hop each for the sender task.
sqlite3 errors are translated into ChiefStoreError here and nowhere else.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio

from chief.answer_rules import Answer, Refused, Reply, Seen, Tap
from chief.errors import ChiefStoreError
from chief.model import Ask, Message
from chief.store import answers, asks, inbox, reminders, reports, schema, telegram, urgent
from chief.store.answers import AskOf, ButtonOf
from chief.store.asks import AskEdit, AskMessage
from chief.store.inbox import InboxState
from chief.store.reminders import NextReminder, Plan
from chief.store.reports import Accepted, ReportRow
from chief.store.schema import MIGRATIONS, SCHEMA_VERSION
from chief.store.sql import scalar, write
from chief.store.telegram import InDoubt, QueuedRing, TelegramQueueStatus
from plumbing import files
from plumbing.db_thread import ConnectionThread

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Accepted",
    "AskEdit",
    "AskMessage",
    "ChiefStore",
    "InDoubt",
    "InboxState",
    "QueuedRing",
    "ReportRow",
    "TelegramQueueStatus",
    "Transactions",
]

T = TypeVar("T")


class Transactions:
    """The store's transactions for a use case that runs several of them in ONE hop
    (`ChiefStore.in_one_hop`), on the connection's thread. Each method is one transaction: it
    commits, or it rolls back and raises ChiefStoreError."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    def accept(self, chief_id: int, rows: list[ReportRow], queue_telegram: bool) -> list[Accepted]:
        """`ChiefStore.accept_reports`, inside the hop."""
        return self._translated(write, urgent.accept, chief_id, rows, queue_telegram)

    def land(
        self, chief_id: int, turn_kind_of: Callable[[str], str], limit: int
    ) -> tuple[list[tuple[str, int]], bool]:
        """`ChiefStore.land_undelivered`, inside the hop."""
        return self._translated(reports.land, chief_id, turn_kind_of, limit)

    def _translated(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(self._conn, *args)
        except sqlite3.Error as exc:
            raise ChiefStoreError(f"chief.db at {self._path}: {exc}") from exc


def _plan(conn: sqlite3.Connection, path: Path, plan: Callable[..., T], args: tuple[Any, ...]) -> T:
    return plan(Transactions(conn, path), *args)


class ChiefStore:
    """One sqlite3 connection to chief.db; every method is one transaction (or one read) in one
    thread hop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._closed = False
        self._db_thread = ConnectionThread("chief-db")
        self._conn: sqlite3.Connection | None = None  # used on that thread only

    @classmethod
    @asynccontextmanager
    async def open(cls, path: Path, *, create: bool = True) -> AsyncIterator[ChiefStore]:
        """Open (creating the file and its folder unless `create=False`) and migrate chief.db."""
        if not create and not await anyio.Path(path).exists():
            raise ChiefStoreError(
                f"no chief.db at {path} — start the door once (chief serve), or point CHIEF_DB at "
                "the right file"
            )
        try:
            # 0700 whatever the umask: chief.db holds the conversation and the ask keys.
            await anyio.to_thread.run_sync(files.make_folders, path.parent)
        except OSError as exc:
            raise ChiefStoreError(f"cannot create the folder of chief.db at {path}: {exc}") from exc
        store = cls(path)
        try:
            try:
                await store._db_thread.call(store._open)
            except (sqlite3.Error, OSError) as exc:  # OSError: another user's file
                raise ChiefStoreError(f"cannot open chief.db at {path}: {exc}") from exc
            await store._hop(schema.prepare, path)
            yield store
        finally:
            store._closed = True
            # Shielded: a cancelled owner still closes the connection, after the hops queued
            # before it.
            with anyio.CancelScope(shield=True):
                await store._db_thread.call(store._close)
            store._db_thread.stop()

    def _closed_error(self) -> ChiefStoreError:
        return ChiefStoreError(
            f"chief.db at {self.path} is closed — use the Chief inside its `async with` block"
        )

    async def _hop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(connection, *args)` on the connection's thread: one hop, errors translated."""
        if self._closed:
            raise self._closed_error()
        try:
            return await self._db_thread.call(self._run, fn, args)
        except sqlite3.Error as exc:
            raise ChiefStoreError(f"chief.db at {self.path}: {exc}") from exc

    # On the connection's thread:

    def _open(self) -> None:
        self._conn = schema.connect(self.path)

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        conn = self._conn
        if conn is None:  # a hop that reached the thread after the closing one
            raise self._closed_error()
        return fn(conn, *args)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def resolve_chief(self, owner: str) -> int:
        """The owner's Master Chief id, created on first use."""
        return await self._hop(write, reports.resolve_chief, owner)

    async def find_chief(self, owner: str) -> int | None:
        """The owner's Master Chief id, or None when it was never created (read only)."""
        found = await self._hop(scalar, "SELECT id FROM chiefs WHERE owner = ?", (owner,))
        return None if found is None else int(found)

    async def owners(self) -> list[str]:
        """Every owner with a Master Chief in this file."""
        return await self._hop(reports.owners)

    async def in_one_hop(self, plan: Callable[..., T], *args: Any) -> T:
        """Run `plan(transactions, *args)` as ONE hop: a use case's several transactions
        (`Transactions`) back to back on the connection's thread, no other hop between them."""
        return await self._hop(_plan, self.path, plan, args)

    async def accept_reports(
        self, chief_id: int, rows: list[ReportRow], *, queue_telegram: bool = False
    ) -> list[Accepted]:
        """The accept transaction alone (one FULL commit): every row's report row and, with
        `queue_telegram`, its Telegram entry, or none of them. Landing is the drainer's."""
        return await self._hop(write, urgent.accept, chief_id, rows, queue_telegram)

    async def land_undelivered(
        self, chief_id: int, turn_kind_of: Callable[[str], str], limit: int
    ) -> tuple[list[tuple[str, int]], bool]:
        """Append up to `limit` undelivered reports in outbox order and record each message id,
        all in one transaction. Returns ((key, message id) landed, whether more may wait)."""
        return await self._hop(reports.land, chief_id, turn_kind_of, limit)

    async def append_message(
        self, chief_id: int, role: str, content: str, turn_kind: str, origin: str
    ) -> int:
        """Append one message (autocommit, one statement) and return its id."""
        return await self._hop(reports.append_message, chief_id, role, content, turn_kind, origin)

    async def recent_messages(self, chief_id: int, limit: int) -> list[Message]:
        """The last `limit` messages, oldest first."""
        return await self._hop(reports.recent_messages, chief_id, limit)

    async def undelivered_count(self, chief_id: int) -> int:
        """Reports queued for this Chief that have not landed yet."""
        sql = "SELECT COUNT(*) FROM chief_report_outbox WHERE chief_id = ? AND message_id IS NULL"
        return int(await self._hop(scalar, sql, (chief_id,)))

    async def queue_telegram(self, text: str) -> tuple[int, int]:
        """Queue a Telegram entry with no outbox row (nothing to deduplicate by): its seq and
        how many entries are ahead of it."""
        return await self._hop(write, telegram.queue_alone, text)

    async def telegram_head(self, limit: int, now: float | None = None) -> list[QueuedRing]:
        """The first `limit` entries of the Telegram queue at `now` (epoch seconds; None: the
        wall clock), oldest first (an ask's with its live buttons)."""
        return await self._hop(urgent.head, limit, time.time() if now is None else now)

    # -- asks (chief.store.asks) ------------------------------------------------------------

    async def queue_ask(self, ask: Ask, text: str) -> tuple[int, int]:
        """One transaction: the request open with live buttons (minted when this chief.db
        never saw it) and an ask entry queued; its seq and the entries ahead of it."""
        return await self._hop(write, asks.queue_ask, ask, text)

    async def due_ask_edits(self, now: float, limit: int) -> list[AskEdit]:
        """The settles' edits due at `now` (unix seconds), oldest first."""
        return await self._hop(asks.due_edits, now, limit)

    async def next_ask_edit_at(self) -> float | None:
        """When the earliest queued edit is due, or None."""
        return await self._hop(asks.next_edit_at)

    async def ask_edit_done(self, seq: int) -> None:
        """The edit happened, or there is nothing left to edit."""
        await self._hop(write, asks.edit_done, seq)

    async def defer_ask_edit(self, seq: int, next_attempt_at: float, error: str) -> None:
        """Count a failed try of an edit and when to try again."""
        await self._hop(write, asks.defer_edit, seq, next_attempt_at, error)

    async def ask_button(self, token: str) -> tuple[str, int, str, bool] | None:
        """(ask key, request id, choice, void) of a button token, or None."""
        return await self._hop(asks.button, token)

    async def ask_by_message(
        self, chat_id: int, message_id: int
    ) -> tuple[str, int, list[str], bool] | None:
        """(ask key, request id, choices, void) of the ask a message rang, or None."""
        return await self._hop(asks.ask_by_message, chat_id, message_id)

    async def messages_of_ask(self, ask_key: str) -> list[AskMessage]:
        """Every message that rang the ask, oldest first."""
        return await self._hop(asks.messages_of_ask, ask_key)

    async def void_ask(self, ask_key: str) -> None:
        """One transaction: the ask's buttons void; its unsent entries never ring."""
        await self._hop(write, asks.void_ask, ask_key)

    async def mark_rung(
        self,
        seqs: list[int],
        outbox_ids: list[str],
        telegram_message_id: int | None,
        chat_id: int | str | None = None,
    ) -> None:
        """One transaction: mark every outbox row the message carried as sent (a repeat writes
        nothing; `telegram_message_id` None: Telegram took it and its id could not be read)
        and take their entries off the queue; an ask it rang is remembered as (chat_id,
        message id) against its request."""
        await self._hop(write, urgent.mark_rung, seqs, outbox_ids, telegram_message_id, chat_id)

    async def defer_rings(self, seqs: list[int], next_attempt_at: float, error: str) -> None:
        """Count a failed try of these entries and when to try again (nothing rang: their
        in-flight record is cleared)."""
        await self._hop(write, telegram.defer_rings, seqs, next_attempt_at, error)

    async def begin_send(self, seqs: list[int], send_id: str) -> None:
        """Record, durably and before the send, that `send_id` carries these entries."""
        await self._hop(write, telegram.begin_send, seqs, send_id)

    async def record_doubts(self, reason: str, next_attempt_at: float | None) -> list[InDoubt]:
        """One transaction: each send still in flight becomes an in-doubt event (recorded, and
        its entries kept as one group to ring again, marked); with `next_attempt_at`, deferred
        to it. The events, each with its entries."""
        return await self._hop(write, telegram.record_doubts, reason, next_attempt_at)

    async def telegram_status(self) -> TelegramQueueStatus:
        """Depth, oldest entry, the head's last error and next try."""
        return await self._hop(telegram.status)

    async def sent_count(self) -> int:
        """Coop outbox rows the door has rung Telegram for."""
        return int(await self._hop(scalar, "SELECT COUNT(*) FROM coop_notify_sent", ()))

    # -- the door's phone (chief.store.inbox) ------------------------------------------------

    async def inbox_state(self) -> InboxState:
        """The last update id handled and the /quiet override."""
        return await self._hop(inbox.state)

    async def was_handled(self, update_key: str) -> bool:
        """Whether the update with this key (`chief.telegram.update_key`) was handled."""
        return bool(await self._hop(inbox.was_handled, update_key))

    async def note_handled(self, update_key: str, update_id: int) -> None:
        """Record that this update was handled: a replay of it changes nothing."""
        await self._hop(write, inbox.note_handled, update_key, update_id)

    async def set_quiet_until(self, until: float | None) -> None:
        """The /quiet override: silent until `until` (unix seconds), or off (None)."""
        await self._hop(write, inbox.set_quiet_until, until)

    async def note_stranger(
        self, sender_id: int, chat_id: int | None, update_key: str, update_id: int
    ) -> bool:
        """One transaction: count a stranger's update and record it as handled; True when the
        sender is new."""
        return bool(
            await self._hop(write, inbox.note_stranger, sender_id, chat_id, update_key, update_id)
        )

    # The owner's answers from the phone (chief.store.answers), one hop each.

    async def record_tap(
        self, tap: Tap, answer_key: str, button_of: ButtonOf, decide: Callable[..., Any]
    ) -> Answer | Seen | Refused:
        """One FULL commit: the tap's facts read, `decide` (chief.answer_rules.decide_tap)
        asked, and a new pending answer recorded under `answer_key` when it says so."""
        return await self._hop(write, answers.record_tap, tap, answer_key, button_of, decide)

    async def record_reply(
        self, reply: Reply, answer_key: str, ask_of: AskOf, decide: Callable[..., Any]
    ) -> Answer | Seen | Refused | None:
        """`record_tap`'s twin for a text reply to an ask message (Refused: nothing recorded,
        the owner is told why)."""
        return await self._hop(write, answers.record_reply, reply, answer_key, ask_of, decide)

    async def settle_answer(
        self,
        answer_key: str,
        outcome: str,
        detail: str,
        settled_line: Callable[[Answer], str | None],
    ) -> tuple[Answer | None, bool]:
        """One FULL commit: the ledger's answer recorded on a pending answer (once) and, when
        `settled_line` (chief.answer_rules.settled_line) gives one, the request's asks settled
        (buttons void, their messages' edits queued). The row now, and whether edits were
        queued (the ask task is to be woken)."""
        return await self._hop(
            write, urgent.settle_answer, answer_key, outcome, detail, settled_line
        )

    async def defer_answer(self, answer_key: str, next_attempt_at: float, error: str) -> None:
        await self._hop(write, answers.defer, answer_key, next_attempt_at, error)

    async def open_answers(self, limit: int) -> list[Answer]:
        """Answers still waiting for the ledger, the earliest recorded first."""
        return await self._hop(answers.open_answers, limit)

    async def answer_by_key(self, answer_key: str) -> Answer | None:
        return await self._hop(answers.by_key, answer_key)

    async def pending_answers(self) -> int:
        """Answers still waiting for the ledger."""
        return await self._hop(answers.pending_count)

    # An ask's reminders (chief.store.reminders), one hop each.

    async def ring_due_reminders(self, now: float, plan: Plan) -> tuple[int, float | None]:
        """One transaction: the reminders due by `now`, each queued (and its schedule moved
        on), held or ended as `plan` rules; how many were queued and when the next is due."""
        return await self._hop(write, reminders.ring_due, now, plan)

    async def reminders_status(self) -> tuple[int, NextReminder | None]:
        """How many asks have a reminder scheduled, and the earliest."""
        return await self._hop(reminders.status)

    # Urgent reports (chief.store.urgent): the door's `chief.phone.urgent` runs its use cases.

    async def urgent_write(self, use_case: Callable[..., T], *args: Any) -> T:
        """One FULL commit running `use_case(conn, *args)`, a function of chief.store.urgent."""
        return await self._hop(write, use_case, *args)

    async def urgent_read(self, use_case: Callable[..., T], *args: Any) -> T:
        """One read running `use_case(conn, *args)`, a function of chief.store.urgent."""
        return await self._hop(use_case, *args)

    # The fallback channel (chief.store.fallback): the door's `chief.fallback.task`
    # runs its use cases.

    async def fallback_write(self, use_case: Callable[..., T], *args: Any) -> T:
        """One FULL commit running `use_case(conn, *args)`, a function of chief.store.fallback."""
        return await self._hop(write, use_case, *args)

    async def fallback_read(self, use_case: Callable[..., T], *args: Any) -> T:
        """One read running `use_case(conn, *args)`, a function of chief.store.fallback."""
        return await self._hop(use_case, *args)
