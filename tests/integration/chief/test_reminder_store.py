"""An ask's reminders in chief.db (chief.store.reminders, chief.phone.reminders' plan) on a real
file: a reminder queued before its ask's deadline and still waiting on the Telegram queue when
the deadline comes (the chat's pacing behind a backlog, an outage) is never handed to the
sender after it, and the nag task's next turn takes it off the queue. Found by the power-cut
run (a reminder queued at the deadline's eve rang 0.24 s after it, a digest between)."""

from __future__ import annotations

import time
from pathlib import Path

from chief.model import Ask, Extras, Remind
from chief.phone.reminders import Reminders
from chief.store import ChiefStore, ReportRow

CHAT = 1


async def test_a_reminder_still_queued_at_its_deadline_never_rings(tmp_path: Path) -> None:
    rang_at = time.time()
    deadline_at = rang_at + 10.0
    ask = Ask(5, "q-" + "5" * 32, "pay the plumber", ("approve", "decline"),
              deadline_at=deadline_at, default="decline", remind=Remind(4.0, 3))  # fmt: skip
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        chief_id = await store.resolve_chief("owner")
        row = ReportRow("chief-report:coop-notify:d-5", "request #5 from agent: pay the plumber",
                        "d-5", None, Extras(ask))  # fmt: skip
        await store.accept_reports(chief_id, [row], queue_telegram=True)
        [first] = await store.telegram_head(10)
        await store.mark_rung([first.seq], ["d-5"], 3, CHAT)  # its reminders scheduled
        reminders = Reminders(store)
        due = await reminders.ring_due(rang_at + 8.0)  # the second falls due at the deadline
        assert due.queued == 1
        [reminder] = await store.telegram_head(10, now=deadline_at - 0.5)
        assert reminder.text.startswith("Reminder 1 of 3")
        assert reminder.reply_to_message_id == 3
        # The deadline comes with the reminder still queued: the sender is never given it.
        assert await store.telegram_head(10, now=deadline_at) == []
        assert await store.telegram_head(10, now=deadline_at + 1.0) == []
        # The nag task's next turn ends the schedule and takes it off the queue.
        after = await reminders.ring_due(deadline_at + 0.2)
        assert (after.queued, after.next_at) == (0, None)
        assert (await store.telegram_status()).depth == 0
