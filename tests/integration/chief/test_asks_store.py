"""The asks' tables on a real chief.db, through the Chief the door uses: an ask's entry carries
its live buttons; a settle that comes while its ask is in flight lets the send finish and
queues the edit with the sent mark; one that comes while the send fails or is in doubt takes
the ask off the queue (it never rings, nor repeats); a settle is once per ask; a fresh
ledger's ask reusing a request id is another ask (its own key, fresh tokens), and the old ask's
message and tokens stay the old ask's."""

from __future__ import annotations

import sqlite3
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.model import Ask, Extras, Settle

pytestmark = pytest.mark.timeout(30)

CHAT = 4242
KEY = "q-" + "7" * 32
ASK = Ask(7, KEY, "order?", ("approve", "decline"))
SETTLE = Settle(7, KEY)


def opened(folder: Path) -> AbstractAsyncContextManager[Chief]:
    return Chief.open(ChiefConfig(db_path=folder / "chief.db", owner="owner"))


async def notify(chief: Chief, outbox_id: str, text: str, extras: Extras) -> int | None:
    _, accepted = await chief.report_notify(
        text, outbox_id, wait=1.0, queue_telegram=True, extras=extras
    )
    return accepted.telegram_seq


def edits(chief: Chief) -> list[tuple[int, int, str]]:
    with sqlite3.connect(chief.db_path) as conn:
        rows = conn.execute("SELECT chat_id, message_id, text FROM ask_edits ORDER BY seq")
        return [(int(a), int(b), str(c)) for a, b, c in rows]


async def test_a_settle_during_the_asks_send_queues_its_edit_with_the_mark(tmp_path: Path) -> None:
    async with opened(tmp_path) as chief:
        seq = await notify(chief, "ask", "request #7: order?", Extras(ask=ASK))
        assert seq is not None
        [head] = await chief.store.telegram_head(10)
        assert [label for label, _ in head.buttons] == ["approve", "decline"]
        await chief.store.begin_send([seq], "send-1")  # the ask is on its way to Telegram
        await notify(chief, "settle", "request #7 closed", Extras(settles=SETTLE))
        assert next(e.seq for e in await chief.store.telegram_head(10)) == seq  # in flight: kept
        await chief.store.mark_rung([seq], ["ask"], 501, CHAT)
        assert await chief.store.ask_by_message(CHAT, 501) == (KEY, 7, ["approve", "decline"], True)
        assert edits(chief) == [(CHAT, 501, "request #7: order?\n\nrequest #7 closed")]
        await notify(chief, "settle-2", "request #7 abandoned", Extras(settles=SETTLE))
        assert len(edits(chief)) == 1  # once per ask
        for _, token in head.buttons:
            assert (await chief.store.ask_button(token) or ("", 0, "", False))[3] is True


@pytest.mark.parametrize("outcome", ["failed", "in_doubt"])
async def test_a_settle_during_a_send_that_did_not_ring_for_sure_drops_the_ask(
    tmp_path: Path, outcome: str
) -> None:
    async with opened(tmp_path) as chief:
        seq = await notify(chief, "ask", "request #7: order?", Extras(ask=ASK))
        assert seq is not None
        await chief.store.begin_send([seq], "send-1")
        await notify(chief, "settle", "request #7 closed", Extras(settles=SETTLE))
        if outcome == "failed":
            await chief.store.defer_rings([seq], 0.0, "refused")
        else:
            [event] = await chief.store.record_doubts("the answer was lost", 0.0)
            assert event.seqs == [seq]  # the event is still recorded
        assert [entry.text for entry in await chief.store.telegram_head(10)] == [
            "request #7 closed"
        ]


async def test_a_fresh_ledgers_ask_of_the_same_request_id_is_another_ask(
    tmp_path: Path,
) -> None:
    async with opened(tmp_path) as chief:
        await notify(chief, "ask-old", "request #7: order?", Extras(ask=ASK))
        [old] = await chief.store.telegram_head(10)
        await chief.store.mark_rung([old.seq], ["ask-old"], 501, CHAT)
        await notify(chief, "settle", "request #7 closed", Extras(settles=SETTLE))
        # The same row again changes nothing: it rang, its sent mark answers.
        assert await notify(chief, "ask-old", "request #7: order?", Extras(ask=ASK)) is None
        # A fresh ledger files its own request #7: a new row, a new ask (its own key).
        fresh = Ask(7, "q-" + "f" * 32, "walk?", ("ok",))
        seq = await notify(chief, "ask-new", "request #7: walk?", Extras(ask=fresh))
        settled, new = await chief.store.telegram_head(10)
        assert (settled.text, new.seq) == ("request #7 closed", seq)
        assert [label for label, _ in new.buttons] == ["ok"]
        assert {token for _, token in new.buttons}.isdisjoint(token for _, token in old.buttons)
        for _, token in old.buttons:
            assert (await chief.store.ask_button(token) or ("", 0, "", False))[3] is True
        for _, token in new.buttons:
            assert await chief.store.ask_button(token) == (fresh.key, 7, "ok", False)
        # The old message is still the old ask's: settled, its choices, never the new one's.
        assert await chief.store.ask_by_message(CHAT, 501) == (KEY, 7, ["approve", "decline"], True)


async def test_a_reask_of_an_open_request_keeps_its_tokens(tmp_path: Path) -> None:
    async with opened(tmp_path) as chief:
        await notify(chief, "ask", "request #7: order?", Extras(ask=ASK))
        [first] = await chief.store.telegram_head(10)
        await chief.store.mark_rung([first.seq], ["ask"], 501, CHAT)
        seq, ahead = await chief.store.queue_ask(ASK, "request #7: order? (approve / decline)")
        assert ahead == 0
        [again] = await chief.store.telegram_head(10)
        assert (again.seq, again.outbox_id, again.buttons) == (seq, None, first.buttons)
        await chief.store.mark_rung([seq], [], 502, CHAT)
        messages = await chief.store.messages_of_ask(KEY)
        assert [message.message_id for message in messages] == [501, 502]
