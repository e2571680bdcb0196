"""The seeded power-cut run at a small size (tests.powercut.powercut_run; `ops/powercut` runs it
at any size): producers write, the power goes three times, and every promise holds after."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.powercut.powercut_run import PowerCutRun
from tests.support.powercut import LayerUnavailable, fuse_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SMALL_ROWS = 150
SMALL_CUTS = 3
SEED_ENV = "POWERCUT_SEED"


def run_seeded(folder: Path, seed: int, rows: int, cuts: int) -> PowerCutRun:
    reason = fuse_unavailable()
    if reason is not None:
        pytest.skip(f"power-cut run: FUSE is not available here ({reason})")
    return PowerCutRun(folder, seed=seed, rows=rows, cuts=cuts)


def test_power_cuts_lose_no_acknowledged_row_and_repeat_telegram_only_when_in_doubt(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    raw = os.environ.get(SEED_ENV)
    seed = int(raw) if raw else random.SystemRandom().randrange(2**32)
    print(f"{SEED_ENV}={seed}")
    run = run_seeded(tmp_path, seed, SMALL_ROWS, SMALL_CUTS)
    try:
        outcome = run.run()
    except LayerUnavailable as exc:
        pytest.skip(f"power-cut run: {exc}")
    print("\n".join(outcome.lines()))
    record_property("powercut_wall_s", round(outcome.wall_s, 1))
    assert len(outcome.cuts) == SMALL_CUTS
    outcome.check()
