"""Fixtures of the power-cut suite: a mounted layer, or one line saying why FUSE cannot be had
here and a skip (never a failure for that reason)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.powercut import Layer, LayerUnavailable, fuse_unavailable


@pytest.fixture
def layer(tmp_path: Path) -> Iterator[Layer]:
    """A power-cut layer mounted over this test's folder; unmounted at the end."""
    reason = fuse_unavailable()
    if reason is not None:
        pytest.skip(f"power-cut layer: FUSE is not available here ({reason})")
    made = Layer(tmp_path / "layer")
    try:
        made.mount()
    except LayerUnavailable as exc:
        pytest.skip(f"power-cut layer: {exc}")
    yield made
    made.close()
