"""The door's Telegram tables: the queue the sender task rings in order (`telegram_queue`, with
each send's in-flight record), the in-doubt events (`telegram_doubts`) and the sent marks
(`coop_notify_sent`); an ask's entry names its ask key (`ask_key`, see
`chief.store.asks`). Every function runs on the store's connection thread, inside the caller's
transaction unless it says otherwise."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from chief.store.sql import utc_now
from plumbing.faults import fault

Buttons = tuple[tuple[str, str], ...]  # (label, callback token), in the choices' order


@dataclass(frozen=True)
class QueuedRing:
    """One entry of the Telegram queue, as the sender task reads it."""

    seq: int
    outbox_id: str | None
    text: str
    attempts: int
    next_attempt_at: float  # unix seconds; 0 when never tried
    repeat_of: str | None = None  # the in-doubt send this entry rings again with (one group)
    ask_key: str | None = None  # an ask: rung alone, with that ask's buttons
    buttons: Buttons = ()  # an ask's live buttons, (label, token) (`chief.store.asks.head`)
    reply_to_message_id: int | None = None  # a reminder rings as a reply to its ask's message
    urgent: str | None = None  # an urgent report's ring: rung alone, loud (`chief.store.urgent`)
    got_it: str | None = None  # its live "Got it" token (`chief.store.urgent.head`)
    chat: str | None = None  # the chat it rings when not the owner's (a ladder's rung 2)


@dataclass(frozen=True)
class InDoubt:
    """One in-doubt event: the send `send_id` and the entries it carried, in order."""

    send_id: str
    seqs: list[int]
    outbox_ids: list[str]


@dataclass(frozen=True)
class TelegramQueueStatus:
    """What an operator sees of the Telegram queue."""

    depth: int
    oldest_queued_at: str | None
    last_error: str | None
    next_attempt_at: float | None  # unix seconds of the head's next try, when it was deferred
    in_doubt_events: int = 0  # sends whose outcome the door could not know, since chief.db began


def insert_telegram(
    conn: sqlite3.Connection,
    outbox_id: str | None,
    text: str,
    ask_key: str | None = None,
    reply_to_message_id: int | None = None,
    *,
    urgent: str | None = None,
    chat: str | None = None,
) -> int:
    """A new Telegram queue entry (an ask's, with its `ask_key`; a reminder's, a reply to
    `reply_to_message_id`; an urgent ring's, with its urgent key, in `chat` when it is not the
    owner's); its seq."""
    cursor = conn.execute(
        "INSERT INTO telegram_queue (outbox_id, text, queued_at, ask_key, reply_to_message_id, "
        "urgent, chat) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (outbox_id, text, utc_now(), ask_key, reply_to_message_id, urgent, chat),
    )
    return int(cursor.lastrowid or 0)


def queue_alone(conn: sqlite3.Connection, text: str) -> tuple[int, int]:
    """A Telegram entry with no outbox row (nothing to deduplicate by): its seq and how many
    entries are ahead of it."""
    seq = insert_telegram(conn, None, text)
    return seq, entries_ahead(conn, [seq])[seq]


def entries_ahead(conn: sqlite3.Connection, seqs: list[int]) -> dict[int, int]:
    """For each queue seq of `seqs`: how many Telegram entries are queued before it, read in
    one pass from the earliest (not one COUNT per entry, each scanning the queue before it)."""
    if not seqs:
        return {}
    first = min(seqs)
    (before,) = conn.execute(
        "SELECT COUNT(*) FROM telegram_queue WHERE seq < ?", (first,)
    ).fetchone()
    wanted = set(seqs)
    ahead: dict[int, int] = {}
    later = conn.execute("SELECT seq FROM telegram_queue WHERE seq >= ? ORDER BY seq", (first,))
    for rank, (seq,) in enumerate(later):
        if seq in wanted:
            ahead[int(seq)] = int(before) + rank
            if len(ahead) == len(wanted):
                break
    return ahead


# A reminder (an ask's entry with no outbox row, a reply to the ask's first message) not in
# flight whose ask's deadline has come by the parameter `now`: the deadline decides the ask, so
# the reminder would ring a question already settled (its settle may be a second away).
STALE_REMINDER = (
    "q.reply_to_message_id IS NOT NULL AND q.outbox_id IS NULL AND q.send_id IS NULL AND "
    "q.ask_key IN (SELECT ask_key FROM asks WHERE deadline_at IS NOT NULL AND deadline_at <= ?)"
)


def head(conn: sqlite3.Connection, limit: int, now: float) -> list[QueuedRing]:
    """The first `limit` entries of the queue at `now` (epoch seconds), oldest first, less the
    stale reminders (`STALE_REMINDER`): their ask's deadline has come, so none rings after it.
    The entries of another chat than the owner's (a ladder's rung 2, rare and urgent) come
    first, so a backlog in the owner's chat never hides them."""
    rows = conn.execute(
        "SELECT seq, outbox_id, text, attempts, next_attempt_at, repeat_of, ask_key, "
        f"reply_to_message_id, urgent, chat FROM telegram_queue q WHERE NOT ({STALE_REMINDER}) "
        "ORDER BY chat IS NULL, seq LIMIT ?",
        (now, limit),
    ).fetchall()
    return [
        QueuedRing(
            int(a), b, str(c), int(d), float(e), f, None if g is None else str(g),
            reply_to_message_id=None if h is None else int(h), urgent=i,
            chat=None if j is None else str(j),
        )
        for a, b, c, d, e, f, g, h, i, j in rows
    ]  # fmt: skip


def drop_stale_reminders(conn: sqlite3.Connection, now: float) -> None:
    """Take off the queue the reminders whose ask's deadline has come by `now` and that no
    send carries (`head` hands them to no sender already)."""
    conn.execute(f"DELETE FROM telegram_queue AS q WHERE {STALE_REMINDER}", (now,))


def queued_urgent(conn: sqlite3.Connection, key: str) -> bool:
    """Whether a ring of the urgent report `key` in the owner's chat is still queued."""
    row = conn.execute(
        "SELECT 1 FROM telegram_queue WHERE urgent = ? AND chat IS NULL LIMIT 1", (key,)
    ).fetchone()
    return row is not None


def drop_urgent(conn: sqlite3.Connection, key: str) -> None:
    """Take the urgent report's repeats off the queue (not its first ring, an outbox row's):
    it stopped, so they never ring. One in flight rings, and loses its button when marked."""
    conn.execute(
        "DELETE FROM telegram_queue WHERE urgent = ? AND outbox_id IS NULL AND send_id IS NULL",
        (key,),
    )


def ladder_entries(conn: sqlite3.Connection, seqs: list[int]) -> list[tuple[str, str, int]]:
    """(urgent key, text, rung) of the urgent entries among `seqs`, in queue order: rung 2 for
    one that rings another chat than the owner's, else 1."""
    if not seqs:
        return []
    marks = ", ".join("?" * len(seqs))
    rows = conn.execute(
        "SELECT urgent, text, chat IS NOT NULL FROM telegram_queue "
        f"WHERE seq IN ({marks}) AND urgent IS NOT NULL ORDER BY seq",
        seqs,
    ).fetchall()
    return [(str(key), str(text), 2 if other else 1) for key, text, other in rows]


def keyed_entries(
    conn: sqlite3.Connection, seqs: list[int], key: Literal["ask_key", "urgent"]
) -> list[tuple[str, str]]:
    """(key, text) of the entries among `seqs` that carry `key` (an ask's key, an urgent
    report's), in queue order."""
    if not seqs:
        return []
    marks = ", ".join("?" * len(seqs))
    rows = conn.execute(
        f"SELECT {key}, text FROM telegram_queue "
        f"WHERE seq IN ({marks}) AND {key} IS NOT NULL ORDER BY seq",
        seqs,
    ).fetchall()
    return [(str(found), str(text)) for found, text in rows]


def drop_void_asks(conn: sqlite3.Connection) -> None:
    """Take off the queue every ask entry whose ask's buttons are void (settled, or answered)
    that no send carries now: it never rings. One in flight is marked when it rang, and its
    message edited (`chief.store.asks.remember`)."""
    conn.execute(
        "DELETE FROM telegram_queue WHERE send_id IS NULL AND ask_key IN "
        "(SELECT ask_key FROM asks WHERE voided_at IS NOT NULL)"
    )


def begin_send(conn: sqlite3.Connection, seqs: list[int], send_id: str) -> None:
    """The in-flight record of a send, committed (FULL) before the send goes out."""
    conn.executemany(
        "UPDATE telegram_queue SET send_id = ? WHERE seq = ?", [(send_id, seq) for seq in seqs]
    )


def record_doubts(
    conn: sqlite3.Connection, reason: str, next_attempt_at: float | None
) -> list[InDoubt]:
    """Every send still in flight becomes one in-doubt event: its entries are recorded in
    telegram_doubts, keep the group they ring again with (`repeat_of`: the first in-doubt send
    of the group) and lose the in-flight mark; with `next_attempt_at`, they are deferred to it
    (a failed try) too."""
    rows = conn.execute(
        "SELECT send_id, seq, outbox_id FROM telegram_queue WHERE send_id IS NOT NULL ORDER BY seq"
    ).fetchall()
    events: dict[str, InDoubt] = {}
    for send_id, seq, outbox_id in rows:
        event = events.setdefault(str(send_id), InDoubt(str(send_id), [], []))
        event.seqs.append(int(seq))
        if outbox_id is not None:
            event.outbox_ids.append(str(outbox_id))
    now = utc_now()
    conn.executemany(
        "INSERT OR IGNORE INTO telegram_doubts (send_id, seq, outbox_id, reason, recorded_at) "
        "VALUES (?, ?, ?, ?, ?)",
        [(str(send_id), int(seq), outbox_id, reason, now) for send_id, seq, outbox_id in rows],
    )
    conn.execute(
        "UPDATE telegram_queue SET repeat_of = COALESCE(repeat_of, send_id), send_id = NULL "
        "WHERE send_id IS NOT NULL"
    )
    if next_attempt_at is not None and rows:
        conn.executemany(
            "UPDATE telegram_queue SET attempts = attempts + 1, next_attempt_at = ?, "
            "last_error = ? WHERE seq = ?",
            [(next_attempt_at, reason, int(seq)) for _, seq, _ in rows],
        )
    drop_void_asks(conn)  # a settled ask in doubt is not repeated
    return list(events.values())


def mark_rung(
    conn: sqlite3.Connection,
    seqs: list[int],
    outbox_ids: list[str],
    telegram_message_id: int | None,
) -> None:
    """The sent mark of every row one Telegram message carried, and their queue entries gone."""
    fault("chief.store.mark_notify_sent")  # test-only: a full disk under the sent mark
    now = utc_now()
    conn.executemany(
        "INSERT OR IGNORE INTO coop_notify_sent (outbox_id, telegram_message_id, sent_at) "
        "VALUES (?, ?, ?)",
        [(outbox_id, telegram_message_id, now) for outbox_id in outbox_ids],
    )
    conn.executemany("DELETE FROM telegram_queue WHERE seq = ?", [(seq,) for seq in seqs])


def defer_rings(
    conn: sqlite3.Connection, seqs: list[int], next_attempt_at: float, error: str
) -> None:
    conn.executemany(
        "UPDATE telegram_queue SET attempts = attempts + 1, next_attempt_at = ?, last_error = ?, "
        "send_id = NULL WHERE seq = ?",
        [(next_attempt_at, error, seq) for seq in seqs],
    )
    drop_void_asks(conn)  # an ask settled while its failed send was out never rings


def status(conn: sqlite3.Connection) -> TelegramQueueStatus:
    depth, oldest = conn.execute("SELECT COUNT(*), MIN(queued_at) FROM telegram_queue").fetchone()
    head = conn.execute(
        "SELECT last_error, next_attempt_at, attempts FROM telegram_queue ORDER BY seq LIMIT 1"
    ).fetchone()
    last_error = head[0] if head else None
    next_at = float(head[1]) if head and int(head[2]) > 0 else None
    (doubts,) = conn.execute("SELECT COUNT(DISTINCT send_id) FROM telegram_doubts").fetchone()
    return TelegramQueueStatus(int(depth), oldest, last_error, next_at, int(doubts))
