"""The ledger's public functions, by the name library callers and the README use.

They are `engine.api`'s (the edge that decides local or owner service); the use cases
themselves are in `engine.verbs`, their SQL in `engine.store.ledger`.
"""

from __future__ import annotations

from engine.api import (
    abandon_todo,
    add_request,
    add_todo,
    close_request,
    done_todo,
    history,
    list_items,
    release_request,
    release_todo,
    take_request,
    take_todo,
)

__all__ = [
    "abandon_todo",
    "add_request",
    "add_todo",
    "close_request",
    "done_todo",
    "history",
    "list_items",
    "release_request",
    "release_todo",
    "take_request",
    "take_todo",
]
