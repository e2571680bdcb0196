"""Receipts: private, exclusive, fsync'd before the call; never bodies; pruned by the rules."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from engine.owner import receipts


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_receipt_is_private_exclusive_and_uncertain(home: Path) -> None:
    path = receipts.create("k1", "add_todo", "ab" * 32, "/data/coop.db")

    assert path.parent == home / "receipts"
    assert _mode(path.parent) == 0o700
    assert _mode(path) == 0o600
    body = json.loads(path.read_text())
    assert body["state"] == "uncertain"
    assert set(body) == {
        "key",
        "method",
        "input_sha256",
        "database",
        "state",
        "created_at",
        "settled_at",
        "outcome",
    }
    with pytest.raises(FileExistsError):
        receipts.create("k1", "add_todo", "ab" * 32, "/data/coop.db")


def test_a_loose_receipts_folder_is_made_private(home: Path) -> None:
    (home / "receipts").mkdir(mode=0o755)
    (home / "receipts").chmod(0o755)

    receipts.create("k1", "add_todo", "00", "/data/coop.db")

    assert _mode(home / "receipts") == 0o700


def test_settling_keeps_the_file_private_and_records_the_outcome(home: Path) -> None:
    receipts.create("k1", "done_todo", "00", "/data/coop.db")

    settled = receipts.settle("k1", receipts.REJECTED, "never_arrived")

    assert settled is not None
    assert settled["state"] == "rejected"
    assert settled["outcome"] == "never_arrived"
    assert _mode(home / "receipts" / "k1.json") == 0o600
    assert receipts.read("k1") == settled
    assert receipts.uncertain() == []


def test_a_key_that_is_not_a_plain_name_is_refused(home: Path) -> None:
    with pytest.raises(ValueError, match="not a request key"):
        receipts.create("../escape", "add_todo", "00", "/data/coop.db")


def test_prune_removes_settled_receipts_older_than_a_day_and_keeps_uncertain(home: Path) -> None:
    for key in ("old-committed", "old-rejected", "old-uncertain", "fresh-committed"):
        receipts.create(key, "add_todo", "00", "/data/coop.db")
    receipts.settle("old-committed", receipts.COMMITTED)
    receipts.settle("old-rejected", receipts.REJECTED)
    two_days_later = time.time() + 2 * receipts.SETTLED_KEEP_S

    removed = receipts.prune(now=two_days_later)

    assert removed == 2
    assert {r["key"] for r in receipts.all_receipts()} == {"old-uncertain", "fresh-committed"}
    assert [r["key"] for r in receipts.uncertain()] == ["old-uncertain", "fresh-committed"]


def test_a_receipt_settled_less_than_a_day_ago_stays(home: Path) -> None:
    receipts.create("k1", "add_todo", "00", "/data/coop.db")
    receipts.settle("k1", receipts.COMMITTED)

    assert receipts.prune(now=time.time() + receipts.SETTLED_KEEP_S / 2) == 0
    assert receipts.read("k1") is not None


def test_prune_runs_at_most_once_an_hour(home: Path) -> None:
    start = time.time() + 2 * receipts.SETTLED_KEEP_S
    receipts.create("first", "add_todo", "00", "/data/coop.db")
    receipts.settle("first", receipts.COMMITTED)
    assert receipts.prune(now=start) == 1

    receipts.create("second", "add_todo", "00", "/data/coop.db")
    receipts.settle("second", receipts.COMMITTED)
    later = start + 2 * receipts.SETTLED_KEEP_S
    # Within the hour after the last prune nothing is looked at, however old.
    assert receipts.prune(now=start + receipts.PRUNE_EVERY_S / 2) == 0
    assert receipts.read("second") is not None
    assert receipts.prune(now=later) == 1
    assert receipts.read("second") is None
    assert _mode(home / "receipts" / receipts.PRUNE_STAMP_NAME) == 0o600
