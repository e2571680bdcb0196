"""A sent mark that fails (a full disk under chief.db) must not ring the phone again: the door
keeps the sent-but-unmarked row in memory and writes its mark before it answers the next
request for that row. Only a crash between the send and the mark can ring twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from chief.faults import FAULTS_ENV
from tests.integration.door.door_env import body, door_stack

pytestmark = pytest.mark.timeout(60)


async def test_door_failed_sent_mark_never_rings_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk_full = tmp_path / "disk-full"
    monkeypatch.setenv(FAULTS_ENV, f"chief.store.mark_notify_sent:raise-while={disk_full}")
    document = body("mark-1", text="todo #61 done: the mark fails")
    async with door_stack(tmp_path) as stack:
        assert stack.chief is not None
        disk_full.touch()
        with capture_logs() as logs:
            first = await stack.notify(document)
            # The engine retries while the disk is still full: the phone must not ring again.
            second = await stack.notify(document)
        assert [first.status_code, second.status_code] == [503, 503]
        assert first.json() == {"detail": "chief_unavailable"}
        assert stack.emulator.texts() == [document["text"]]
        assert [e["event"] for e in logs if e["event"] == "door.mark_failed"]
        assert await stack.chief.sent_count() == 0

        disk_full.unlink()  # the space is back: the next retry writes the mark, rings nothing
        third = await stack.notify(document)
        assert third.status_code == 200, third.text
        assert third.json()["already_sent"] is True
        assert stack.emulator.texts() == [document["text"]]
        assert await stack.chief.sent_count() == 1
        assert await stack.chief_lines("mark-1") == 1
