"""The direct door to the ledger, for a script or a test: a connection of its own, closed
afterwards, and shut in service mode.

After `coop cutover` the owner service is the only door to the ledger, so `connection()` reads
the owner file (`engine.owner_file`) before it opens anything and refuses with `Direct SQL is
disabled; use the Coop service API` when one governs the database (a broken one fails closed
too). The engine's own verbs never come through here: `engine.api` decides local or owner once
per call and opens with `engine.store.unit_of_work`. This module and `engine.api` are the only
readers of the owner file on a connection's way; the store reads none.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from engine import owner_file, store
from engine.errors import OwnerUnavailable
from engine.store.schema import DIRECT_SQL_DISABLED


@contextmanager
def connection(db: str | os.PathLike[str] | None = None) -> Iterator[sqlite3.Connection]:
    """A connection to the ledger `db` (else the configured one), closed when the block ends;
    `OwnerUnavailable` in service mode, before anything is opened."""
    path = store.locate(db)
    if owner_file.owner_config(path) is not None:
        raise OwnerUnavailable(DIRECT_SQL_DISABLED)
    conn = store.open_connection(path)
    try:
        yield conn
    finally:
        conn.close()
