"""Every error class of the engine is in its error module's tree: defined in `engine.errors`
and descended from `CoopError`, so an entry point's `except CoopError` catches it and prints
one line (issue 20: `ArgumentError` subclassed `ValueError`; `NeedsAPerson`, `CommandRefused`
and `KeyConflict` lived beside the code that raised them)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import engine
from engine.errors import CoopError


def _error_classes() -> list[type[BaseException]]:
    found = []
    for module in pkgutil.walk_packages(engine.__path__, "engine."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        found.extend(
            value
            for value in vars(loaded).values()
            if isinstance(value, type)
            and issubclass(value, BaseException)
            and value.__module__ == module.name
            and not value.__name__.startswith("_")  # a module's own control flow, never raised out
        )
    return found


ERRORS = _error_classes()


@pytest.mark.parametrize("error", ERRORS, ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_engine_error_is_in_the_coop_error_tree(error: type[BaseException]) -> None:
    assert issubclass(error, CoopError)
    assert error.__module__ == "engine.errors"


def test_the_tree_holds_the_classes_that_lived_elsewhere() -> None:
    names = {cls.__name__ for cls in ERRORS if cls.__module__ == "engine.errors"}
    assert {"ArgumentError", "CommandRefused", "KeyConflict", "NeedsAPerson"} <= names
