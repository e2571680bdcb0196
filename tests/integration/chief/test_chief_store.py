"""chief.db on a real file: migrations on open, WAL, the Master Chief never deleted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from chief.config import ChiefConfig
from chief.conversation import Chief
from chief.errors import ChiefStoreError
from chief.store import SCHEMA_VERSION, ChiefStore, ReportRow
from tests.integration.chief.conftest import execute, query


async def test_open_creates_the_folder_migrates_and_uses_wal(chief_config: ChiefConfig) -> None:
    async with ChiefStore.open(chief_config.db_path):
        pass
    db = chief_config.db_path
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(db, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"chiefs", "messages", "chief_report_outbox", "coop_notify_sent"} <= tables


async def test_two_openers_of_a_fresh_file_migrate_it_once(chief_config: ChiefConfig) -> None:
    opened: list[int] = []

    async def open_and_resolve() -> None:
        async with ChiefStore.open(chief_config.db_path) as store:
            opened.append(await store.resolve_chief("owner"))

    async with anyio.create_task_group() as tasks:
        for _ in range(4):
            tasks.start_soon(open_and_resolve)
    assert len(opened) == 4
    assert len(set(opened)) == 1
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM chiefs") == [(1,)]


async def test_the_master_chief_is_created_once_and_kept_across_opens(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        first_id = chief.chief_id
        await chief.append_message("user", "hello")
    async with Chief.open(chief_config) as chief:
        assert chief.chief_id == first_id
        assert [m.content for m in await chief.recent_messages()] == ["hello"]
    with pytest.raises(sqlite3.IntegrityError, match="never deleted"):
        execute(chief_config.db_path, "DELETE FROM chiefs")


async def test_a_newer_schema_is_refused_with_what_to_do(chief_config: ChiefConfig) -> None:
    async with ChiefStore.open(chief_config.db_path):
        pass
    execute(chief_config.db_path, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ChiefStoreError, match="upgrade coop-notifier"):
        async with ChiefStore.open(chief_config.db_path):
            pass


async def test_an_unopenable_path_is_one_line_of_a_chief_store_error(tmp_path: Path) -> None:
    path = tmp_path / "chief.db"
    path.mkdir()  # a folder where the file should be
    with pytest.raises(ChiefStoreError) as caught:
        async with ChiefStore.open(path):
            pass
    assert str(caught.value).startswith(f"cannot open chief.db at {path}: ")
    assert "\n" not in str(caught.value)


async def test_reading_a_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(ChiefStoreError, match="chief serve"):
        async with ChiefStore.open(tmp_path / "absent.db", create=False):
            pass
    assert not (tmp_path / "absent.db").exists()


async def test_using_the_chief_after_close_says_so(chief_config: ChiefConfig) -> None:
    async with Chief.open(chief_config) as chief:
        pass
    with pytest.raises(ChiefStoreError, match="is closed — use the Chief inside its `async with`"):
        await chief.undelivered_count()


async def test_a_chief_db_of_the_first_schema_gains_the_telegram_queue(
    chief_config: ChiefConfig,
) -> None:
    from chief.store import MIGRATIONS

    db = chief_config.db_path
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        conn.execute("INSERT INTO coop_notify_sent VALUES ('7', 70, '2026-11-29T00:00:00+00:00')")
    async with Chief.open(chief_config) as chief:
        # A row rung before the upgrade stays rung; a new one is queued with its report.
        _, old = await chief.report_notify("row 7", "7", wait=1.0, queue_telegram=True)
        _, new = await chief.report_notify("row 8", "8", wait=1.0, queue_telegram=True)
        assert (old.already_sent, old.telegram_message_id, old.telegram_seq) == (True, 70, None)
        assert (new.already_sent, new.telegram_seq, new.telegram_ahead) == (False, 1, 0)
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(db, "SELECT outbox_id, text FROM telegram_queue") == [("8", "row 8")]


async def test_landing_adopts_a_message_written_by_hand_under_a_queued_key(tmp_path: Path) -> None:
    # A report row queued, then a message with its key written by hand before it lands: the
    # landing adopts that message (no second line, no UNIQUE error wedging the queue), and the
    # rows around it land in order.
    db = tmp_path / "chief.db"
    async with ChiefStore.open(db) as store:
        chief_id = await store.resolve_chief("owner")
        for n in (1, 2, 3):
            await store.accept_reports(chief_id, [ReportRow(f"k{n}", f"line {n}")])
        execute(
            db,
            "INSERT INTO messages (chief_id, role, content, turn_kind, origin, "
            f"external_request_id, created_at) VALUES ({chief_id}, 'assistant', 'by hand', "
            "'cron', 'scheduled_task', 'k2', '2026-11-30T00:00:00+00:00')",
        )
        (hand,) = query(db, "SELECT id FROM messages WHERE external_request_id = 'k2'")[0]
        landed, more = await store.land_undelivered(chief_id, lambda key: "cron", limit=256)
    assert more is False
    assert [key for key, _ in landed] == ["k1", "k2", "k3"]
    assert dict(landed)["k2"] == hand
    assert query(db, "SELECT external_request_id, content FROM messages ORDER BY id") == [
        ("k2", "by hand"),
        ("k1", "line 1"),
        ("k3", "line 3"),
    ]
    assert query(db, "SELECT COUNT(*) FROM chief_report_outbox WHERE message_id IS NULL") == [(0,)]


async def test_a_chief_db_of_the_second_schema_keeps_its_queue_with_nothing_in_flight(
    chief_config: ChiefConfig,
) -> None:
    """An upgrade with entries queued: they gain the in-flight columns empty (no send of the
    old version is known to be in flight), so they ring as usual, no in-doubt event."""
    from chief.store import MIGRATIONS

    db = chief_config.db_path
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as conn:
        for statement in (*MIGRATIONS[0], *MIGRATIONS[1]):
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 2")
        conn.execute(
            "INSERT INTO telegram_queue (outbox_id, text, queued_at) "
            "VALUES ('9', 'row 9', '2026-11-29T00:00:00+00:00')"
        )
    async with Chief.open(chief_config) as chief:
        assert await chief.store.record_doubts("restart", None) == []
        (head,) = await chief.store.telegram_head(10)
        assert (head.outbox_id, head.repeat_of) == ("9", None)
        assert (await chief.telegram_status()).in_doubt_events == 0
    assert query(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]


async def test_a_send_left_in_flight_is_one_in_doubt_event_that_keeps_its_group(
    chief_config: ChiefConfig,
) -> None:
    async with Chief.open(chief_config) as chief:
        for n in (1, 2, 3):
            await chief.report_notify(f"row {n}", str(n), wait=1.0, queue_telegram=True)
        first, second, third = await chief.store.telegram_head(10)
        await chief.store.begin_send([first.seq, second.seq], "send-a")
    # The door died: the next opener finds the send in flight.
    async with Chief.open(chief_config) as chief:
        (event,) = await chief.store.record_doubts("restart", None)
        assert (event.send_id, event.seqs, event.outbox_ids) == (
            "send-a",
            [first.seq, second.seq],
            ["1", "2"],
        )
        head = await chief.store.telegram_head(10)
        assert [entry.repeat_of for entry in head] == ["send-a", "send-a", None]
        assert [entry.attempts for entry in head] == [0, 0, 0]  # due at once
        assert await chief.store.record_doubts("restart", None) == []  # recorded once
        # The repeat in flight fails plainly: its group stays, its in-flight record goes.
        await chief.store.begin_send([first.seq, second.seq], "send-b")
        await chief.store.defer_rings([first.seq, second.seq], 0.0, "refused")
        assert await chief.store.record_doubts("restart", None) == []
        head = await chief.store.telegram_head(10)
        assert [entry.repeat_of for entry in head] == ["send-a", "send-a", None]
        assert (await chief.telegram_status()).in_doubt_events == 1
    assert query(
        chief_config.db_path, "SELECT send_id, seq, outbox_id FROM telegram_doubts ORDER BY seq"
    ) == [("send-a", first.seq, "1"), ("send-a", second.seq, "2")]
    assert third.repeat_of is None
