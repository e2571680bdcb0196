"""The ladder of urgent reports in chief.db (chief.store.urgent, issue 35) on a real file: rung 2
is queued once, in the second person's chat, in the transaction that records the rung (asked
again at the same time, or after the store is opened again as a restarted door would, nothing
more is queued; without a second person nothing climbs); the owner's repeats leave rung 2's
"Got it" live; the first acknowledgement, from either chat or by key, stops every rung and
edits every live message naming who, with one Chief line; and the seam a further rung uses
(`ringing`, `reach_rung`, `acknowledge_key`) records a rung once."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from chief.store import ChiefStore, urgent
from chief.urgent_rules import MACHINE, SECOND, UrgentBounds
from tests.integration.chief.test_urgent_store import filed, lines

BOUNDS = UrgentBounds(rering_s=60.0, expire_s=3600.0, escalate_s=600.0)
SECOND_CHAT = "5151"


def edits(path: Path) -> list[tuple[str, int, str]]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT chat_id, message_id, text FROM ask_edits ORDER BY seq")
        return [(str(chat), int(message), str(text)) for chat, message, text in rows]


async def climbed(store: ChiefStore, key: str) -> float:
    """File `key`, let the nag task see it, then one turn past its escalation: rung 2 queued.
    The time of that turn."""
    await filed(store, key, "URGENT: the freezer is warm")
    created = time.time()
    await store.urgent_write(urgent.ring_due, created, BOUNDS, SECOND_CHAT)
    at = created + BOUNDS.escalate_s + 1
    turn = await store.urgent_write(urgent.ring_due, at, BOUNDS, SECOND_CHAT)
    assert turn.escalated == [key]
    return at


async def test_rung_two_is_queued_once_in_the_second_chat_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        at = await climbed(store, "d-1")
        assert (await store.urgent_write(urgent.ring_due, at, BOUNDS, SECOND_CHAT)).escalated == []
        [ringing] = await store.urgent_read(urgent.ringing)
        assert (ringing.key, ringing.rung) == ("d-1", 2)
    async with ChiefStore.open(path) as store:  # the door again, after a kill
        again = await store.urgent_write(urgent.ring_due, at + 1, BOUNDS, SECOND_CHAT)
        assert again.escalated == []
        rung_two = [e for e in await store.telegram_head(10) if e.chat == SECOND_CHAT]
        assert [e.text for e in rung_two] == [
            "URGENT, nobody acknowledged it for 10 min: the freezer is warm"
        ]
        assert rung_two[0].got_it is not None
        assert rung_two[0].ask_key is None  # Got it alone: the second person decides nothing


async def test_nothing_climbs_without_a_second_person(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        await filed(store, "d-2", "URGENT: the freezer is warm")
        late = time.time() + BOUNDS.escalate_s + 1
        turn = await store.urgent_write(urgent.ring_due, late, BOUNDS, None)
        assert turn.escalated == []
        assert all(entry.chat is None for entry in await store.telegram_head(10))


async def test_the_second_persons_got_it_stops_every_rung_and_edits_each_chat(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        at = await climbed(store, "d-3")
        head = await store.telegram_head(10)
        [second] = [entry for entry in head if entry.chat == SECOND_CHAT]
        await store.mark_rung([second.seq], [], 7, int(SECOND_CHAT))
        # The owner's next repeat rings and is marked: rung 2's "Got it" stays live.
        [repeat] = [entry for entry in await store.telegram_head(10) if entry.chat is None]
        await store.mark_rung([repeat.seq], [], 4, 4242)
        assert (SECOND_CHAT, 7) not in [(chat, message) for chat, message, _ in edits(path)]
        assert second.got_it is not None
        acked = await store.urgent_write(urgent.acknowledge_token, second.got_it, at, SECOND)
        assert acked is not None
        assert acked.stopped is not None
        assert "by the second person (after 3 rings)" in acked.stopped.line
        again = await store.urgent_write(urgent.acknowledge_key, "d-3", at + 1, MACHINE)
        assert again is not None
        assert again.stopped is None
        edited = {(chat, message): text for chat, message, text in edits(path)}
        assert "by the second person" in edited[(SECOND_CHAT, 7)]
        assert "by the second person" in edited[("4242", 4)]
        assert await store.urgent_read(urgent.ringing) == []
        assert await store.telegram_head(10) == []
    assert len(lines(path, "#urgent-ack")) == 1


async def test_a_further_rung_is_reached_once_and_acknowledged_by_key(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        await climbed(store, "d-4")
        assert await store.urgent_write(urgent.reach_rung, "d-4", 3) is True
        assert await store.urgent_write(urgent.reach_rung, "d-4", 3) is False
        [ringing] = await store.urgent_read(urgent.ringing)
        assert ringing.rung == 3
        assert await store.urgent_read(urgent.key_of, str(ringing.number)) == "d-4"
        assert await store.urgent_read(urgent.key_of, "99999") is None
        acked = await store.urgent_write(urgent.acknowledge_key, "d-4", time.time(), MACHINE)
        assert acked is not None
        assert acked.stopped is not None
        assert "by chief ack on the machine" in acked.stopped.line
        assert await store.urgent_write(urgent.reach_rung, "d-4", 4) is False
