"""Holes the power-cut layer found, each kept as a regression test: the project's own code on
the layer, the power cut with nothing unsynced kept (`keep=0`), and what it promised checked."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

from engine.owner import receipts
from tests.support.powercut import Layer
from tests.support.waiting import wait_until_sync

DIGEST = "0" * 64
JOIN_TIMEOUT_S = 10.0


def test_the_first_receipt_in_a_fresh_data_folder_survives_a_cut(layer: Layer) -> None:
    """The receipts folder is made by the first routed call. Its receipt and the folder's own
    entries were fsynced, but the folder's name in the data folder was not: a cut took the
    folder, and the uncertain receipt with it, exactly when the caller needs it to reconcile
    (found by the layer's per-directory commit, `names_undone` 1)."""
    folder = layer.path / "receipts"
    receipts.create("k1", "done_todo", DIGEST, str(layer.path / "coop.db"), directory=folder)

    figures = layer.cut(seed=1)
    layer.mount()

    assert figures["names_undone"] == 0, figures
    kept = receipts.read("k1", directory=folder)
    assert kept is not None
    assert kept["state"] == receipts.UNCERTAIN


def test_a_settled_receipt_stays_settled_after_a_cut(layer: Layer) -> None:
    folder = layer.path / "receipts"
    receipts.create("k2", "done_todo", DIGEST, str(layer.path / "coop.db"), directory=folder)
    receipts.settle("k2", receipts.COMMITTED, directory=folder)

    layer.cut(seed=2)
    layer.mount()

    kept = receipts.read("k2", directory=folder)
    assert kept is not None
    assert kept["state"] == receipts.COMMITTED
    assert list(folder.iterdir()) == [folder / "k2.json"]  # no temp file left behind


def test_a_receipt_cut_before_its_fsync_is_never_left_empty(layer: Layer) -> None:
    """Caller A made its receipt and was still inside its fsync when caller B's receipt synced
    the folder, and with it A's name; then the power went. A's name survived with none of its
    bytes: an empty receipt, which no reader can parse, `coop reconcile` cannot list and prune
    never removes (found by the service-mode run at 1,000 rows, POWERCUT_SEED=404; here the
    layer stalls A inside its fsync to land there every time)."""
    folder = layer.path / "receipts"
    receipts.create("first", "add_todo", DIGEST, str(layer.path / "coop.db"), directory=folder)
    layer.request(op="stall", name="stalled", pid=os.getpid(), min_bytes=1)
    caller_a = threading.Thread(target=create_quietly, args=("stalled", folder), daemon=True)
    caller_a.start()
    wait_until_sync(lambda: layer.stats()["stalled"], what="caller A inside its fsync")
    receipts.create("other", "add_todo", DIGEST, str(layer.path / "coop.db"), directory=folder)

    layer.cut(seed=3)
    caller_a.join(JOIN_TIMEOUT_S)
    layer.mount()

    for path in folder.glob("*.json"):
        assert json.loads(path.read_text())["state"] == receipts.UNCERTAIN, path.name
    assert receipts.read("other", directory=folder) is not None


def create_quietly(key: str, folder: Path) -> None:
    """Caller A: its fsync fails when the power goes, as it would for a process killed there."""
    with contextlib.suppress(OSError):
        receipts.create(key, "add_todo", DIGEST, "/data/coop.db", directory=folder)
