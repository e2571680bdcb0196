"""What a verb runs on (`Unit`) and what it answers (`Row`), shared by the verb modules."""

from __future__ import annotations

import sqlite3

# `typing` stays off the CLI's cold path (~7 ms): these names are for mypy, which reads any
# `TYPE_CHECKING` as true. At run time `Row` is the plain `dict` it is, which is what
# `typing.get_type_hints` finds when the owner checks a shipped call against a verb.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from engine.config import EngineConfig

    Row = dict[str, Any]
else:
    Row = dict

#: The ledger file a public call names (`db=`; None: `$COOP_DB`, else the default). Read by
#: the caller that opens the unit (`engine.api`); a verb runs on the unit it is handed.
Db = str | None


class Unit:
    """What a verb runs on, handed in by its caller: `Unit(tx=..., config=...)`.

    Both are asked for only when the verb needs them, after it has checked its own arguments:
    a refused call opens no database and reads no setting it does not need. (A slotted class,
    not a NamedTuple: `typing` costs a cold CLI ~7 ms.)"""

    __slots__ = ("config", "tx")

    def __init__(
        self, tx: Callable[[], sqlite3.Connection], config: Callable[[], EngineConfig]
    ) -> None:
        #: The connection of the caller's open transaction (opened on first use by `engine.api`).
        self.tx = tx
        #: The deciders' names, the stale age and the database path.
        self.config = config
