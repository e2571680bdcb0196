"""Urgent reports in chief.db (chief.store.urgent) on a real file: a repeat is queued and its
schedule moved on in one transaction (asked again at the same time, or after the store is
opened again as a restarted door would, nothing more is queued); "Got it" twice acknowledges
once with one Chief line; and an urgent request answered from the phone (the door's answers, the
ledger played at its seam) is acknowledged by its settle, its repeats stopped."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import anyio

from chief.model import Ask, Extras, Settle
from chief.phone.answers import Answers
from chief.store import ChiefStore, ReportRow, urgent
from chief.store.answers import asks_button, asks_request
from chief.urgent_rules import UrgentBounds
from tests.integration.door.test_answers_forwarder import CHAT, Ledger, Phone, tap

BOUNDS = UrgentBounds(rering_s=60.0, expire_s=600.0)
ASK = Ask(7, "q-" + "7" * 32, "order the bigger bag?", ("approve", "decline"))


def lines(path: Path, suffix: str) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute(
            "SELECT text FROM chief_report_outbox WHERE source_key LIKE ?", (f"%{suffix}",)
        ).fetchall()
    return [str(text) for (text,) in rows]


async def filed(store: ChiefStore, outbox_id: str, text: str, ask: Ask | None = None) -> int:
    """An urgent row accepted and its first ring marked sent as message 3; its queue seq."""
    chief_id = await store.resolve_chief("owner")
    row = ReportRow("chief-report:coop-notify:" + outbox_id, text, outbox_id, None,
                    Extras(ask, urgent=True))  # fmt: skip
    [accepted] = await store.accept_reports(chief_id, [row], queue_telegram=True)
    assert accepted.telegram_seq is not None
    [entry] = await store.telegram_head(10)
    assert entry.urgent == outbox_id
    assert entry.got_it is not None
    await store.mark_rung([entry.seq], [outbox_id], 3, CHAT)
    return accepted.telegram_seq


async def test_a_repeat_is_queued_once_per_due_time_across_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        await filed(store, "d-1", "URGENT: the freezer is warm")
        first = await store.urgent_write(urgent.ring_due, time.time(), BOUNDS)
        assert first.queued == 0
        assert first.next_at is not None
        due = first.next_at + 1
        turn = await store.urgent_write(urgent.ring_due, due, BOUNDS)
        assert turn.queued == 1
        assert (await store.urgent_write(urgent.ring_due, due, BOUNDS)).queued == 0
    async with ChiefStore.open(path) as store:  # the door again, after a kill
        assert (await store.urgent_write(urgent.ring_due, due, BOUNDS)).queued == 0
        [entry] = await store.telegram_head(10)
        assert entry.text == "URGENT, again (ring 2, waiting 1 min): the freezer is warm"
        assert entry.got_it is not None
        assert entry.outbox_id is None


async def test_got_it_twice_acknowledges_once_and_stops_the_repeats(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        await filed(store, "d-2", "URGENT: front door open")
        turn = await store.urgent_write(urgent.ring_due, time.time(), BOUNDS)
        assert turn.next_at is not None
        await store.urgent_write(urgent.ring_due, turn.next_at + 1, BOUNDS)
        [entry] = await store.telegram_head(10)
        assert entry.got_it is not None
        now = time.time()
        once = await store.urgent_write(urgent.acknowledge_token, entry.got_it, now)
        twice = await store.urgent_write(urgent.acknowledge_token, entry.got_it, now + 1)
        assert once is not None
        assert once.stopped is not None
        assert twice is not None
        assert twice.stopped is None
        assert twice.acked_at == once.acked_at
        assert await store.telegram_head(10) == []  # the queued repeat never rings
        later = await store.urgent_write(urgent.ring_due, now + 3600, BOUNDS)
        assert later.queued == 0
        assert later.expired == []
        assert later.next_at is None
        assert await store.urgent_write(urgent.acknowledge_token, "g-never-minted", now) is None
    [line] = lines(path, "#urgent-ack")
    assert line.endswith("(after 1 rings): front door open")


async def test_an_urgent_request_answered_from_the_phone_is_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    ledger, phone = Ledger(), Phone()
    async with ChiefStore.open(path) as store:
        await filed(store, "d-3", "URGENT: request #7: order the bigger bag?", ASK)
        tokens = dict(await store.urgent_read(_buttons, ASK.key))
        answers = Answers(store, phone, ledger, asks_button, asks_request)
        async with anyio.create_task_group() as tasks:
            await tasks.start(answers.run)
            await answers.on_tap(tap(1, tokens["approve"]))
            tasks.cancel_scope.cancel()
        state = await store.urgent_read(urgent.status, time.time())
    assert ledger.closed == {7: "approve"}
    assert state.ringing == []
    assert state.acknowledged == 1
    [line] = lines(path, "#urgent-ack")
    assert line.endswith("(after 1 rings): request #7: order the bigger bag?")


def _buttons(conn: sqlite3.Connection, ask_key: str) -> tuple[tuple[str, str], ...]:
    from chief.store import asks

    return asks.live_buttons(conn, ask_key)


def _settled_by_deadline(outbox_id: str) -> ReportRow:
    """The ledger's row of ASK's request decided by its deadline (no owner answered)."""
    settle = Settle(ASK.request_id, ASK.key, by="deadline", outcome="closed", choice="decline")
    return ReportRow(
        "chief-report:coop-notify:" + outbox_id,
        'request #7 "order the bigger bag?": no answer by its deadline, so closed with: decline',
        outbox_id,
        None,
        Extras(settles=settle),
    )


async def test_an_urgent_request_its_deadline_decided_went_unacknowledged(tmp_path: Path) -> None:
    """Nobody saw it: the deadline's settle stops its ringing as an expiry (named by the
    status and `coop status --check`), never as the owner's acknowledgement. The power-cut
    run found the deadline's settle written as `acknowledged at ...` (seed 404)."""
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        chief_id = await store.resolve_chief("owner")
        await filed(store, "d-4", "URGENT: request #7: order the bigger bag?", ASK)
        await store.accept_reports(chief_id, [_settled_by_deadline("d-5")], queue_telegram=True)
        state = await store.urgent_read(urgent.status, time.time())
    assert state.ringing == []
    assert state.acknowledged == 0
    assert [entry["key"] for entry in state.expired_unacknowledged] == ["d-4"]
    assert lines(path, "#urgent-ack") == []
    [line] = lines(path, "#urgent-expired")
    assert line.startswith("went unacknowledged after 1 rings in 0 min")
    assert "deadline" in line


async def test_the_deadline_of_an_urgent_request_already_expired_acknowledges_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        chief_id = await store.resolve_chief("owner")
        await filed(store, "d-6", "URGENT: request #7: order the bigger bag?", ASK)
        first = await store.urgent_write(urgent.ring_due, time.time(), BOUNDS)
        assert first.next_at is not None
        turn = await store.urgent_write(urgent.ring_due, time.time() + BOUNDS.expire_s, BOUNDS)
        assert len(turn.expired) == 1
        await store.accept_reports(chief_id, [_settled_by_deadline("d-7")], queue_telegram=True)
    assert lines(path, "#urgent-ack") == []
    assert len(lines(path, "#urgent-expired")) == 1
