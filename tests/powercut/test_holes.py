"""Holes the power-cut layer found, each kept as a regression test: the project's own code on
the layer, the power cut with nothing unsynced kept (`keep=0`), and what it promised checked."""

from __future__ import annotations

from engine.owner import receipts
from tests.support.powercut import Layer

DIGEST = "0" * 64


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
