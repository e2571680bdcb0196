"""chief.db's phone tables (chief/store/inbox.py) on a real file: the offset only moves on, the
/quiet override is kept and cleared, a stranger is new once, and the strangers remembered are
bounded (the one seen longest ago forgotten first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chief.store import ChiefStore, inbox


async def test_the_offset_only_moves_on_and_quiet_is_kept(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        state = await store.inbox_state()
        assert (state.next_offset, state.quiet_until) == (None, None)
        await store.commit_offset(10)
        await store.commit_offset(5)  # a late commit never takes the offset back
        await store.set_quiet_until(1_800_000_000.5)
    async with ChiefStore.open(tmp_path / "chief.db") as store:  # across a restart
        state = await store.inbox_state()
        assert (state.next_offset, state.quiet_until) == (10, 1_800_000_000.5)
        await store.set_quiet_until(None)
        assert (await store.inbox_state()).quiet_until is None


async def test_a_stranger_is_new_once_and_commits_its_offset(tmp_path: Path) -> None:
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        assert await store.note_stranger(777, 777, 3) is True
        assert await store.note_stranger(777, 4242, 4) is False
        assert await store.note_stranger(778, None, 5) is True
        assert (await store.inbox_state()).next_offset == 5


async def test_the_strangers_remembered_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbox, "MAX_STRANGERS", 3)
    async with ChiefStore.open(tmp_path / "chief.db") as store:
        for offset, sender in enumerate([1, 2, 3, 4], start=1):
            assert await store.note_stranger(sender, sender, offset) is True
        assert await store.note_stranger(4, 4, 10) is False  # still remembered
        assert await store.note_stranger(1, 1, 11) is True  # forgotten: logged again
