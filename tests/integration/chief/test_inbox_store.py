"""chief.db's phone tables (chief/store/inbox.py) on a real file: an update is known as handled
by its key (its id and content digest), never by an id floor; the keys remembered are bounded;
the last id is kept only to notice ids going back; the /quiet override is kept and cleared; a
stranger is new once, and the strangers remembered are bounded (the one seen longest ago
forgotten first). A chief.db of the schema before issue 26 migrates."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chief.store import MIGRATIONS, ChiefStore, inbox
from tests.integration.chief.conftest import query


async def test_an_update_is_handled_by_its_key_and_quiet_is_kept(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        state = await store.inbox_state()
        assert (state.last_update_id, state.quiet_until) == (None, None)
        await store.note_handled("10:aa", 10)
        await store.note_handled("5:bb", 5)  # ids go back: the last one is the last one
        await store.set_quiet_until(1_800_000_000.5)
    async with ChiefStore.open(tmp_path / "chief.db") as store:  # across a restart
        state = await store.inbox_state()
        assert (state.last_update_id, state.quiet_until) == (5, 1_800_000_000.5)
        assert await store.was_handled("10:aa") is True
        assert await store.was_handled("10:cc") is False  # the same id, another update
        assert await store.was_handled("6:aa") is False
        await store.set_quiet_until(None)
        assert (await store.inbox_state()).quiet_until is None


async def test_the_updates_remembered_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox, "MAX_SEEN", 3)
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        for update_id in (1, 2, 3, 4):
            await store.note_handled(f"{update_id}:x", update_id)
        await store.note_handled("4:x", 4)  # a replay recorded again changes nothing
        assert [await store.was_handled(f"{n}:x") for n in (1, 2, 3, 4)] == [
            False,
            True,
            True,
            True,
        ]
    assert query(tmp_path / "chief.db", "SELECT COUNT(*) FROM telegram_updates_seen") == [(3,)]


async def test_a_stranger_is_new_once_and_its_update_is_handled(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        assert await store.note_stranger(777, 777, "3:a", 3) is True
        assert await store.note_stranger(777, 4242, "4:a", 4) is False
        assert await store.note_stranger(778, None, "5:a", 5) is True
        assert (await store.inbox_state()).last_update_id == 5
        assert await store.was_handled("4:a") is True


async def test_the_strangers_remembered_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox, "MAX_STRANGERS", 3)
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        for update_id, sender in enumerate([1, 2, 3, 4], start=1):
            assert await store.note_stranger(sender, sender, f"{update_id}:s", update_id) is True
        assert await store.note_stranger(4, 4, "10:s", 10) is False  # still remembered
        assert await store.note_stranger(1, 1, "11:s", 11) is True  # forgotten: new again


# The migration that keyed updates (issue 26); later ones are applied after it on open.
UPDATE_KEYS = 7


async def test_a_chief_db_from_before_update_keys_migrates(tmp_path: Path) -> None:
    # The offset becomes the last id (offset - 1); an answer recorded before keeps its id as
    # its key, and a new answer may reuse its id (ids repeat).
    db = tmp_path / "chief.db"
    with sqlite3.connect(db) as conn:
        for statement in (s for migration in MIGRATIONS[: UPDATE_KEYS - 1] for s in migration):
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {UPDATE_KEYS - 1}")
        conn.execute("UPDATE telegram_inbox SET next_offset = 15")
        conn.execute(
            "INSERT INTO telegram_answers (answer_key, update_id, request_id, ask_key, choice, "
            "chat_id, message_id, recorded_at) VALUES ('a-old', 14, 7, 'q-7', 'approve', 42, 3, "
            "'2026-12-01T00:00:00+00:00')"
        )
    async with ChiefStore.open(db) as store:
        assert (await store.inbox_state()).last_update_id == 14
    assert query(db, "SELECT answer_key, update_key, update_id, choice FROM telegram_answers") == [
        ("a-old", "14", 14, "approve")
    ]
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO telegram_answers (answer_key, update_key, update_id, request_id, "
            "ask_key, choice, chat_id, message_id, recorded_at) VALUES ('a-new', '14:d', 14, 8, "
            "'q-8', 'approve', 42, 9, '2026-12-02T00:00:00+00:00')"
        )
