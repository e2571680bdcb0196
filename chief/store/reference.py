"""chief.db's schema as this build makes it, and the check of a chief.db from a backup against
it (`chief check-backup`, run by `coop restore --with-chief`): the reference is built by
running the migrations on an in-memory database, never kept by hand.
"""

from __future__ import annotations

import sqlite3

from chief.store.schema import MIGRATIONS, SCHEMA_VERSION
from plumbing import dbcheck

__all__ = ["check_backup", "schemas"]


def schemas(version: int) -> list[dbcheck.Schema]:
    """The schema a chief.db at `version` (1 to `SCHEMA_VERSION`) has."""
    return [dbcheck.built(lambda conn: _migrate(conn, version))]


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    for migration in MIGRATIONS[:version]:
        for statement in migration:
            conn.execute(statement)


def check_backup(path: str) -> int:
    """The schema version of the chief.db at `path`, once checked; else ValueError saying the
    first thing wrong (`plumbing.dbcheck.check`)."""
    return dbcheck.check(
        path,
        newest=SCHEMA_VERSION,
        references=schemas,
        maker="the Chief",
        kind="the Chief's chief.db",
    )
