"""The family behind tests/integration/ops/test_restore_checks.py: any change to the schema of a
valid backup's coop.db or chief.db (an object added, dropped or altered, one or two of them, or
its version moved) is refused by `coop restore` in one line, and the data folder stays byte for
byte as it was. Every example is a real `coop restore` process on a real file.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from plumbing import dbcheck
from tests.integration.ops.backups import run, seed, snapshot

#: Examples per database: each is a `coop restore` process (and, for chief.db, a `chief
#: check-backup` one).
EXAMPLES = {"coop.db": 30, "chief.db": 20}
FRESH_NAME = r"[a-z][a-z0-9_]{0,11}"
KINDS = ("table", "index", "trigger", "view")


@dataclass(frozen=True)
class Shape:
    """What a valid database holds: its tables with their columns, and every object by kind."""

    columns: dict[str, list[str]]
    named: dict[str, list[str]]
    version: int

    @property
    def taken(self) -> set[str]:
        names = {name for names in self.named.values() for name in names}
        return names | {column for columns in self.columns.values() for column in columns}


def shape_of(db: Path) -> Shape:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        named = {kind: sorted(n for t, n in rows if t == kind) for kind in KINDS}
        named["index"] = [n for n in named["index"] if not n.startswith("sqlite_autoindex")]
        named["table"] = [n for n in named["table"] if not n.startswith("sqlite_")]
        columns = {
            table: [str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")]
            for table in named["table"]
        }
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    return Shape(columns, named, int(version))


def mutation(shape: Shape) -> st.SearchStrategy[list[str]]:
    """One change of a database of `shape`, as the statements that make it."""
    tables = sorted(shape.columns)
    fresh = st.from_regex(FRESH_NAME, fullmatch=True).filter(
        lambda name: name not in shape.taken and not name.startswith("sqlite")
    )
    table = st.sampled_from(tables)
    column = table.flatmap(lambda t: st.tuples(st.just(t), st.sampled_from(shape.columns[t])))
    timing = st.sampled_from(["BEFORE", "AFTER"])
    event = st.sampled_from(["INSERT", "UPDATE", "DELETE"])
    added = st.one_of(
        fresh.map(lambda n: [f"CREATE TABLE {n} (x)"]),
        st.tuples(fresh, column).map(lambda a: [f"CREATE INDEX {a[0]} ON {a[1][0]} ({a[1][1]})"]),
        st.tuples(fresh, timing, event, table).map(
            lambda a: [f"CREATE TRIGGER {a[0]} {a[1]} {a[2]} ON {a[3]} BEGIN SELECT 1; END"]
        ),
        st.tuples(fresh, table).map(lambda a: [f"CREATE VIEW {a[0]} AS SELECT * FROM {a[1]}"]),
    )
    dropped = st.sampled_from(
        [f"DROP {kind.upper()} {name}" for kind in KINDS for name in shape.named[kind]]
    ).map(lambda statement: [statement])
    altered = st.one_of(
        st.tuples(table, fresh).map(lambda a: [f"ALTER TABLE {a[0]} ADD COLUMN {a[1]} TEXT"]),
        st.tuples(column, fresh).map(
            lambda a: [f"ALTER TABLE {a[0][0]} RENAME COLUMN {a[0][1]} TO {a[1]}"]
        ),
        st.tuples(table, fresh).map(lambda a: [f"ALTER TABLE {a[0]} RENAME TO {a[1]}"]),
        st.tuples(st.sampled_from(shape.named["index"]), column).map(
            lambda a: [f"DROP INDEX {a[0]}", f"CREATE INDEX {a[0]} ON {a[1][0]} ({a[1][1]}, rowid)"]
        ),
        st.tuples(st.sampled_from(shape.named["trigger"] or ["none"]), timing, event, table).map(
            lambda a: [
                f"DROP TRIGGER IF EXISTS {a[0]}",
                f"CREATE TRIGGER {a[0]} {a[1]} {a[2]} ON {a[3]} BEGIN SELECT 2; END",
            ]
        ),
        st.integers(-5, shape.version + 1000)
        .filter(lambda v: v != shape.version)
        .map(lambda v: [f"PRAGMA user_version = {v}"]),
    )
    return st.one_of(added, dropped, altered)


def applied(db: Path, changes: list[list[str]]) -> bool:
    """Apply `changes` to `db`; whether it now differs from what it was (a change its earlier
    one made impossible is skipped)."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        before = (dbcheck.schema(conn), conn.execute("PRAGMA user_version").fetchone())
        for statements in changes:
            conn.execute("SAVEPOINT change")
            try:
                for statement in statements:
                    conn.execute(statement)
            except sqlite3.Error:
                conn.execute("ROLLBACK TO change")
            conn.execute("RELEASE change")
        after = (dbcheck.schema(conn), conn.execute("PRAGMA user_version").fetchone())
    return after != before


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A data folder and a valid backup of it (both databases)."""
    root = seed(tmp_path_factory.mktemp("seed"))
    return root / "home", root / "backup"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "options"), [("coop.db", ()), ("chief.db", ("--with-chief",))], ids=["coop", "chief"]
)
def test_every_change_of_a_backups_schema_is_refused_and_changes_nothing(
    folders: tuple[Path, Path], name: str, options: tuple[str, ...]
) -> None:
    home, backup = folders
    shape = shape_of(backup / name)
    before = snapshot(home)
    refusals: list[str] = []

    @settings(
        max_examples=EXAMPLES[name],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(changes=st.lists(mutation(shape), min_size=1, max_size=2))
    def refused(changes: list[list[str]]) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(shutil.copytree(backup, Path(scratch) / "backup"))
            assume(applied(copy / name, changes))
            status, out, err = run(home, "restore", str(copy), *options)
            assert status == 1, (changes, out, err)
            assert len(err.splitlines()) == 1, (changes, err)
            assert err.startswith(f"coop: backup {copy}/{name}: "), (changes, err)
            assert "Traceback" not in err
            assert snapshot(home) == before, changes
            refusals.append(err)

    refused()
    # A run whose changes all undid themselves or failed to apply proved nothing.
    assert len(refusals) >= EXAMPLES[name] // 2, refusals
    assert run(home, "list")[0] == 0
