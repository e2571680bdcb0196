"""`coop cutover --undo` is durable: after a power cut with nothing unsynced kept (`keep=0`), the
folder is in local mode as the undo left it, never half of it. The undo drops the fence in a
FULL commit, then removes the owner file and the credential: without a directory fsync of those
removals, a cut brought both files back beside an unfenced ledger, and every caller routed to
an owner service again."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from engine import store
from engine.owner import cutover
from tests.support.powercut import Layer


def fence(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return store.fence_triggers(conn)


def test_an_undone_cutover_stays_undone_after_a_cut(
    layer: Layer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    db = layer.path / "coop.db"
    store.open_connection(db).close()
    config = cutover.cutover(str(layer.path / "service.sock"), actor="operator", db=db)
    assert fence(db)

    done = cutover.undo(actor="operator", db=db)

    assert len(done) == 3, done
    figures = layer.cut(seed=26)
    layer.mount()
    assert fence(db) == []
    assert not Path(config["owner_file"]).exists(), figures
    assert not Path(config["credential_file"]).exists(), figures
