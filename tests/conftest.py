"""Suite-wide: the long poles start first, and Ctrl-C reaches the children (below).

The suite runs in worker processes (pytest-xdist, `ops/test`), which take whole test files in
collection order (`--dist loadfile --no-loadscope-reorder`). A file that runs for a minute and
happens to be collected late keeps one worker busy after the others have run out of work, and
the run ends when it does. Tests marked `slow` (the seeded crash run and the other proof runs,
the fuzzes, the hammer, the restarts, the bench smoke runs: each tens of seconds on a loaded
machine) are therefore moved to the front of the collection, in their own order, and their
files with them; every other test keeps its place. It changes which worker runs a test and
when, never what a test does.
"""

from __future__ import annotations

import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as a person's terminal sends it: the tests press it on their children (`chief
    telegram pair`, `coop request wait`) and expect its default action. A non-interactive shell
    starts a background job with SIGINT ignored, an ignored signal is inherited across exec, and
    Python then leaves it ignored: a suite started that way (`ops/test ... &` from a script) ran
    each child deaf to Ctrl-C and failed those tests after their 30 s bound. A Python handler
    here becomes the default action in every child this process starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # a stable sort
