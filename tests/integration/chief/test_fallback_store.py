"""The fallback channel's ledger in chief.db (chief.store.fallback) on a real file: an outage's
notice and each ringing urgent report are queued once, whatever repeats the look (a reopened
store included, as a restarted door would); a report acknowledged first is not sent; a send
left in flight comes back marked as a possible repeat; the outage's end queues ONE Telegram
message listing what went, and only when something went; a report not sent before Telegram
came back goes when Telegram fails again, if it still rings."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

from chief.fallback_rules import NOTICE, REPORT
from chief.model import Extras
from chief.store import ChiefStore, ReportRow, fallback, urgent

AFTER_S = 10.0
WHY = "Telegram refuses the messages (403 Forbidden: bot was blocked by the user)"


async def file_urgent(store: ChiefStore, text: str) -> str:
    chief_id = await store.resolve_chief("owner")
    outbox_id = "d-" + uuid.uuid4().hex
    row = ReportRow("chief-report:coop-notify:" + outbox_id, text, outbox_id, None,
                    Extras(None, urgent=True))  # fmt: skip
    await store.accept_reports(chief_id, [row], queue_telegram=True)
    return outbox_id


def telegram_texts(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [str(t) for (t,) in conn.execute("SELECT text FROM telegram_queue ORDER BY seq")]


def token_of(path: Path, key: str) -> str:
    with closing(sqlite3.connect(path)) as conn:
        (token,) = conn.execute(
            "SELECT token FROM urgent_reports WHERE urgent_key = ?", (key,)
        ).fetchone()
    return str(token)


async def test_an_outage_queues_its_notice_and_each_report_once_and_its_end_tells_telegram(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chief.db"
    async with ChiefStore.open(path) as store:
        first = await file_urgent(store, "URGENT: the freezer is warm")
        second = await file_urgent(store, "URGENT: water in the cellar")
        turn = await store.fallback_write(fallback.look, 100.0, WHY, AFTER_S)
        assert turn.outage is not None
        assert (turn.outage.since, turn.queued) == (100.0, 0)
        assert (await store.fallback_write(fallback.look, 105.0, WHY, AFTER_S)).queued == 0
        assert (await store.fallback_write(fallback.look, 110.0, WHY, AFTER_S)).queued == 3
        assert (await store.fallback_write(fallback.look, 111.0, WHY, AFTER_S)).queued == 0
        # The second report acknowledged (its "Got it") before its mail went: not sent.
        await store.urgent_write(urgent.acknowledge_token, token_of(path, second), 112.0)
        assert (await store.fallback_write(fallback.look, 112.0, WHY, AFTER_S)).dropped == 1
    async with ChiefStore.open(path) as store:  # a restarted door
        assert (await store.fallback_write(fallback.look, 113.0, WHY, AFTER_S)).queued == 0
        found = await store.fallback_read(fallback.waiting, 113.0)
        assert [entry.kind for entry in found.entries] == [NOTICE, REPORT]
        notice, report = found.entries
        assert "the freezer is warm" in report.title
        # The notice in flight when the door died: in doubt, back marked as a possible repeat.
        await store.fallback_write(fallback.begin_send, [notice.seq], "send-1")
        in_flight = await store.fallback_read(fallback.waiting, 113.0)
        assert [entry.seq for entry in in_flight.entries] == [report.seq]
    async with ChiefStore.open(path) as store:
        assert await store.fallback_write(fallback.record_doubts) == 1
        found = await store.fallback_read(fallback.waiting, 114.0)
        assert [(e.seq, e.repeat) for e in found.entries] == [
            (notice.seq, True),
            (report.seq, False),
        ]
        for n, entry in enumerate(found.entries):
            await store.fallback_write(fallback.begin_send, [entry.seq], f"send-{n + 2}")
            await store.fallback_write(fallback.mark_sent, f"send-{n + 2}", 115.0)
        found = await store.fallback_read(fallback.waiting, 116.0)
        assert (found.entries, found.sent_in_hour, found.pending) == ([], 2, False)
        before = telegram_texts(path)
        turn = await store.fallback_write(fallback.look, 200.0, None, AFTER_S)
        assert (turn.outage, turn.told) == (None, True)
        [back] = telegram_texts(path)[len(before) :]
        assert back.startswith("Telegram is back after 1 min")
        assert "the freezer is warm" in back
        assert "water in the cellar" not in back  # acknowledged before it went
        # A second outage: a new notice; the report already sent is never sent again.
        await store.fallback_write(fallback.look, 300.0, WHY, AFTER_S)
        third = await file_urgent(store, "URGENT: smoke in the hall")
        assert (await store.fallback_write(fallback.look, 310.0, WHY, AFTER_S)).queued == 2
        keys = [e.title for e in (await store.fallback_read(fallback.waiting, 311.0)).entries]
        assert len(keys) == 2
        assert "smoke in the hall" in keys[1]
        # It ends with nothing sent: nothing to tell, no Telegram message.
        before = telegram_texts(path)
        turn = await store.fallback_write(fallback.look, 320.0, None, AFTER_S)
        assert (turn.told, turn.dropped) == (False, 2)
        assert telegram_texts(path) == before
        # Telegram fails again: the report it never sent, still ringing, goes this time.
        await store.fallback_write(fallback.look, 400.0, WHY, AFTER_S)
        assert (await store.fallback_write(fallback.look, 410.0, WHY, AFTER_S)).queued == 2
        waiting = await store.fallback_read(fallback.waiting, 411.0)
        assert "smoke in the hall" in waiting.entries[1].title
        await store.fallback_write(fallback.look, 420.0, None, AFTER_S)
        assert first != third
        status = await store.fallback_read(fallback.status, 320.0)
        assert (status["telegram_failing_since"], status["waiting"], status["sent"]) == (None, 0, 2)
