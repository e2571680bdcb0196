"""The ledger's schema as this build makes it, the reference `coop restore` holds a backup's
coop.db to (`engine.backup_check`): built by running the migrations on an in-memory database,
so it is never a list kept by hand and never drifts from what `engine.store` makes.
"""

from __future__ import annotations

import sqlite3

from engine.store.schema import MIGRATIONS, install_fence, statements
from plumbing import dbcheck

__all__ = ["NEWEST", "schemas"]

#: The schema version a ledger this build opens is migrated to.
NEWEST = len(MIGRATIONS)


def schemas(version: int) -> list[dbcheck.Schema]:
    """The schemas a ledger at `version` (1 to `NEWEST`) has: as the migrations leave it, and
    with the fence `coop cutover` adds (a backup taken in service mode)."""
    return [
        dbcheck.built(lambda conn: _migrate(conn, version)),
        dbcheck.built(lambda conn: install_fence(_migrate(conn, version))),
    ]


def _migrate(conn: sqlite3.Connection, version: int) -> sqlite3.Connection:
    for script in MIGRATIONS[:version]:
        for statement in statements(script):
            conn.execute(statement)
    return conn
