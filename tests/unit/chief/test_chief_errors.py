"""One error root; every class drawn in the module docstring; docstrings are default messages."""

from __future__ import annotations

import inspect

import chief.errors as errors
from chief.errors import ChiefError, TelegramUnavailable

CLASSES = [
    obj
    for obj in vars(errors).values()
    if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == errors.__name__
]


def test_every_error_descends_from_the_root_and_is_in_the_tree() -> None:
    assert {c.__name__ for c in CLASSES} >= {"ChiefError", "DoorError", "TelegramUnavailable"}
    for cls in CLASSES:
        assert issubclass(cls, ChiefError)
        assert cls.__name__ in (errors.__doc__ or ""), f"{cls.__name__} missing from the tree"


def test_the_docstring_is_the_default_message() -> None:
    for cls in CLASSES:
        assert str(cls()) == (cls.__doc__ or "").strip()
        assert str(cls("specific")) == "specific"


def test_telegram_unavailable_carries_retry_after() -> None:
    assert TelegramUnavailable().retry_after_s is None
    assert TelegramUnavailable("flood", retry_after_s=3.0).retry_after_s == 3.0
