"""The seeded power-cut run at a small size (tests.powercut.powercut_run; `ops/powercut` runs it
at any size): producers write, the power goes three times, and every promise holds after."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.powercut.powercut_run import Outcome, PowerCutRun
from tests.support.powercut import LayerUnavailable, fuse_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SMALL_ROWS = 150
SMALL_CUTS = 3
OWNER_ROWS = 80
OWNER_CUTS = 2
SEED_ENV = "POWERCUT_SEED"


def run_seeded(folder: Path, *, rows: int, cuts: int, owner: bool = False) -> Outcome:
    """One seeded run (`POWERCUT_SEED` replays one; otherwise a fresh seed, printed first), or
    a skip in one line where FUSE cannot be had."""
    reason = fuse_unavailable()
    if reason is not None:
        pytest.skip(f"power-cut run: FUSE is not available here ({reason})")
    raw = os.environ.get(SEED_ENV)
    seed = int(raw) if raw else random.SystemRandom().randrange(2**32)
    print(f"{SEED_ENV}={seed}")
    try:
        outcome = PowerCutRun(folder, seed=seed, rows=rows, cuts=cuts, owner=owner).run()
    except LayerUnavailable as exc:
        pytest.skip(f"power-cut run: {exc}")
    print("\n".join(outcome.lines()))
    assert len(outcome.cuts) == cuts
    return outcome


def test_power_cuts_lose_no_acknowledged_row_and_repeat_telegram_only_when_in_doubt(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    outcome = run_seeded(tmp_path, rows=SMALL_ROWS, cuts=SMALL_CUTS)
    record_property("powercut_wall_s", round(outcome.wall_s, 1))
    outcome.check()


def test_power_cuts_in_service_mode_leave_every_receipt_settled_and_agreeing(
    tmp_path: Path,
) -> None:
    """After `coop cutover`: the callers' receipts are on the layer too; each one settles (the
    uncertain ones by `coop reconcile`) and agrees with the owner's command log."""
    outcome = run_seeded(tmp_path, rows=OWNER_ROWS, cuts=OWNER_CUTS, owner=True)
    assert outcome.receipts["files"] > 0
    outcome.check()
