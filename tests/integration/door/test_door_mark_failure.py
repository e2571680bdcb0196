"""A sent mark that fails (a full disk under chief.db) must not ring the phone again: the sender
keeps the sent-but-unmarked message in memory, writes its mark before it rings anything else,
and a retry of that row answers already_sent from memory. Only a crash between the send and
the mark can ring twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumbing.faults import FAULTS_ENV
from tests.support.door import body, door_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(60)


async def test_door_failed_sent_mark_never_rings_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk_full = tmp_path / "disk-full"
    monkeypatch.setenv(FAULTS_ENV, f"chief.store.mark_notify_sent:raise-while={disk_full}")
    document = body("mark-1", text="todo #61 done: the mark fails")
    later = body("mark-2", text="todo #62 done: behind the unmarked one")
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        ringer = stack.service.ringer
        assert ringer is not None
        disk_full.touch()
        first = await stack.notify(document)
        assert first.status_code == 200, first.text
        await wait_until(lambda: ringer.unmarked is not None, timeout_s=10, what="the failed mark")
        assert stack.emulator.texts() == [document["text"]]
        # The engine retries while the disk is still full: the phone must not ring again.
        second = await stack.notify(document)
        assert second.status_code == 200
        assert second.json()["already_sent"] is True
        assert second.json()["telegram_message_id"] == stack.emulator.messages[0]["message_id"]
        # Nothing else rings while a mark is owed (it would be marked after, out of order).
        assert (await stack.notify(later)).status_code == 200
        assert stack.emulator.texts() == [document["text"]]
        assert await stack.chief.sent_count() == 0

        disk_full.unlink()  # the space is back: the mark is written, then the next row rings
        await wait_until(
            lambda: len(stack.emulator.texts()) == 2, timeout_s=10, what="the next row"
        )
        assert stack.emulator.texts() == [document["text"], later["text"]]

        async def both_marked() -> bool:
            assert stack.chief is not None
            return await stack.chief.sent_count() == 2  # the second mark follows its receipt

        await wait_until(both_marked, timeout_s=10, what="both rows marked")
        assert (await stack.notify(document)).json()["already_sent"] is True
        assert await stack.chief_lines("mark-1") == 1
