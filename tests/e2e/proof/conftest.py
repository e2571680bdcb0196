"""Fixtures of the proof suite: the seed (printed, replayable) and a stack that never outlives
its test."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.proof.proof_checks import Producers
from tests.e2e.proof.proof_stack import MakeStack, ProofStack

SEED_ENV = "PROOF_SEED"


@pytest.fixture
def seed() -> int:
    """`PROOF_SEED` replays a run; otherwise a fresh seed, printed first so a failure names it."""
    raw = os.environ.get(SEED_ENV)
    value = int(raw) if raw else random.SystemRandom().randrange(2**32)
    print(f"{SEED_ENV}={value}")
    return value


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[MakeStack]:
    """`make_stack(door_env=..., engine_env=...)` over this test's folder; killed at the end."""
    made: list[ProofStack] = []

    def make(**settings: dict[str, str] | None) -> ProofStack:
        stack = ProofStack(tmp_path, **settings)
        made.append(stack)
        return stack

    yield make
    for stack in made:
        stack.close()


@pytest.fixture
def producers(tmp_path: Path) -> Iterator[list[Producers]]:
    """Producer groups made by a test; any still running at the end are killed."""
    made: list[Producers] = []
    yield made
    for group in made:
        group.close()
