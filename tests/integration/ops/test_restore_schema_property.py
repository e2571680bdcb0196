"""The family behind tests/integration/ops/test_restore_checks.py: any change to the schema of a
valid backup's coop.db or chief.db (an object added, dropped or altered, one or two of them, or
its version moved) is refused in one line, and the data folder stays byte for byte as it was.

Two sizes of the one property. The many examples run the very checks `coop restore` runs
(`engine.backup_check.check_ledger` in `coop`'s process; `chief.store.reference.check_backup`,
which `chief check-backup` runs in the child `coop restore --with-chief` starts) here, in this
process, on a real copy of the backup: each is milliseconds, where a process was half a second
(a second for chief.db's two). Each kind of change (`KINDS_OF_CHANGE`) gets examples of its
own, and must have been made and refused in one at least. A few examples go through a real
`coop restore` process on the real data folder, as before: the line the operator reads (the
in-process check's, word for word) and the folder left as it was.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chief.store import reference as chief_reference
from engine import backup_check
from engine.errors import BackupError
from plumbing import dbcheck
from tests.integration.ops.backups import run, seed, snapshot

#: One change: its kind (in `KINDS_OF_CHANGE`) and the statements that make it.
Change = tuple[str, list[str]]

#: Examples per kind of change and database against the checks in this process (milliseconds
#: each). A drawn change of the kind applies in most examples (it fails to only where a fresh
#: name or a second change undoes it), so that the test's own assert that each kind was made
#: and refused at least once fails in well under one run in a million.
EXAMPLES_PER_KIND = 8
#: Examples per database through a real `coop restore` (half a second each; a second for
#: chief.db, whose check is a `chief check-backup` child): the wording and the untouched folder
#: on changes of any kind. test_restore_checks.py runs one of each family through it too.
CLI_EXAMPLES = 4
FRESH_NAME = r"[a-z][a-z0-9_]{0,11}"
KINDS = ("table", "index", "trigger", "view")
#: Every kind of change `mutation` draws (it drops a kind of object the database holds).
KINDS_OF_CHANGE = frozenset(
    [f"add {kind}" for kind in KINDS]
    + [f"drop {kind}" for kind in KINDS]
    + ["add column", "rename column", "rename table", "redefine index", "redefine trigger"]
    + ["move version"]
)


def kinds_of_change(shape: Shape) -> frozenset[str]:
    return KINDS_OF_CHANGE - {f"drop {kind}" for kind in KINDS if not shape.named[kind]}


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


def mutations(shape: Shape) -> dict[str, st.SearchStrategy[list[str]]]:
    """Each kind of change of a database of `shape`: the statements that make one."""
    tables = sorted(shape.columns)
    fresh = st.from_regex(FRESH_NAME, fullmatch=True).filter(
        lambda name: name not in shape.taken and not name.startswith("sqlite")
    )
    table = st.sampled_from(tables)
    column = table.flatmap(lambda t: st.tuples(st.just(t), st.sampled_from(shape.columns[t])))
    timing = st.sampled_from(["BEFORE", "AFTER"])
    event = st.sampled_from(["INSERT", "UPDATE", "DELETE"])
    trigger = "CREATE TRIGGER {} {} {} ON {} BEGIN SELECT {}; END"
    made: dict[str, st.SearchStrategy[list[str]]] = {
        "add table": fresh.map(lambda n: [f"CREATE TABLE {n} (x)"]),
        "add index": st.tuples(fresh, column).map(
            lambda a: [f"CREATE INDEX {a[0]} ON {a[1][0]} ({a[1][1]})"]
        ),
        "add trigger": st.tuples(fresh, timing, event, table).map(
            lambda a: [trigger.format(*a, 1)]
        ),
        "add view": st.tuples(fresh, table).map(
            lambda a: [f"CREATE VIEW {a[0]} AS SELECT * FROM {a[1]}"]
        ),
        **{
            f"drop {kind}": st.sampled_from(shape.named[kind] or ["none"]).map(
                lambda name, kind=kind: [f"DROP {kind.upper()} {name}"]
            )
            for kind in KINDS
        },
        "add column": st.tuples(table, fresh).map(
            lambda a: [f"ALTER TABLE {a[0]} ADD COLUMN {a[1]} TEXT"]
        ),
        "rename column": st.tuples(column, fresh).map(
            lambda a: [f"ALTER TABLE {a[0][0]} RENAME COLUMN {a[0][1]} TO {a[1]}"]
        ),
        "rename table": st.tuples(table, fresh).map(
            lambda a: [f"ALTER TABLE {a[0]} RENAME TO {a[1]}"]
        ),
        "redefine index": st.tuples(st.sampled_from(shape.named["index"] or ["none"]), column).map(
            lambda a: [
                f"DROP INDEX {a[0]}",
                f"CREATE INDEX {a[0]} ON {a[1][0]} ({a[1][1]}) WHERE {a[1][1]} IS NOT NULL",
            ]
        ),
        "redefine trigger": st.tuples(
            st.sampled_from(shape.named["trigger"] or ["none"]), timing, event, table
        ).map(lambda a: [f"DROP TRIGGER IF EXISTS {a[0]}", trigger.format(*a, 2)]),
        "move version": st.integers(-5, shape.version + 1000)
        .filter(lambda v: v != shape.version)
        .map(lambda v: [f"PRAGMA user_version = {v}"]),
    }
    return {kind: made[kind] for kind in kinds_of_change(shape)}


def changes_of(shape: Shape, kind: str) -> st.SearchStrategy[list[Change]]:
    """A change of `kind`, then maybe one of any kind. The kind is the test's parameter, not
    drawn: Hypothesis draws from a list far from evenly (in 150 examples of the one property
    this was, a kind came up 4 times, another 50), and a kind of object the database holds few
    of (chief.db has one trigger among 29 objects) must be dropped as surely as any."""
    made = mutations(shape)
    any_change = st.sampled_from(sorted(made)).flatmap(
        lambda other: made[other].map(lambda statements: (other, statements))
    )
    return st.tuples(made[kind], st.lists(any_change, max_size=1)).map(
        lambda drawn: [(kind, drawn[0]), *drawn[1]]
    )


def applied(db: Path, changes: list[Change]) -> set[str]:
    """Apply `changes` to `db`: the kinds of those that changed its schema or version (a change
    its earlier one made impossible is skipped; one that undid the earlier leaves none)."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("PRAGMA synchronous = OFF")  # the copy is scratch: no fsync per change
        before = now = (dbcheck.schema(conn), conn.execute("PRAGMA user_version").fetchone())
        kinds = set()
        for kind, statements in changes:
            conn.execute("SAVEPOINT change")
            try:
                for statement in statements:
                    conn.execute(statement)
            except sqlite3.Error:
                conn.execute("ROLLBACK TO change")
            conn.execute("RELEASE change")
            then, now = now, (dbcheck.schema(conn), conn.execute("PRAGMA user_version").fetchone())
            if now != then:
                kinds.add(kind)
    return kinds if now != before else set()


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A data folder and a valid backup of it (both databases)."""
    root = seed(tmp_path_factory.mktemp("seed"))
    return root / "home", root / "backup"


def check(name: str, path: Path) -> str:
    """The line `coop restore`'s check of the backup's `name` at `path` refuses it with (after
    `coop: backup PATH: `), run here; AssertionError if it passes."""
    try:
        if name == "coop.db":
            backup_check.check_ledger(str(path))
        else:
            chief_reference.check_backup(str(path))
    except BackupError as exc:
        said = str(exc).removeprefix(f"backup {path}: ").removesuffix("; nothing was restored")
    except ValueError as exc:  # the Chief's check; `coop restore` adds the prefix and the end
        said = str(exc)
    else:
        raise AssertionError(f"{path} passed its check")
    return said


DATABASES = pytest.mark.parametrize(
    ("name", "options"), [("coop.db", ()), ("chief.db", ("--with-chief",))], ids=["coop", "chief"]
)


def sized(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@DATABASES
def test_every_change_of_a_backups_schema_fails_its_check(
    folders: tuple[Path, Path], name: str, options: tuple[str, ...]
) -> None:
    _, backup = folders
    shape = shape_of(backup / name)
    refused_kinds: set[str] = set()

    for kind in sorted(kinds_of_change(shape)):

        @sized(EXAMPLES_PER_KIND)
        @given(changes=changes_of(shape, kind))
        def refused(changes: list[Change]) -> None:
            with tempfile.TemporaryDirectory() as scratch:
                copy = Path(shutil.copy(backup / name, scratch))
                kinds = applied(copy, changes)
                assume(kinds)
                said = check(name, copy)
                assert len(said.splitlines()) == 1, (changes, said)
                refused_kinds.update(kinds)

        refused()
    # Each kind of change was made (and so refused) in at least one example.
    assert refused_kinds == kinds_of_change(shape), kinds_of_change(shape) - refused_kinds


@pytest.mark.slow
@DATABASES
def test_every_change_of_a_backups_schema_is_refused_by_coop_restore_and_changes_nothing(
    folders: tuple[Path, Path], name: str, options: tuple[str, ...]
) -> None:
    home, backup = folders
    shape = shape_of(backup / name)
    before = snapshot(home)
    changes_of_shape = partial(changes_of, shape)
    refusals: list[str] = []

    @sized(CLI_EXAMPLES)
    @given(changes=st.sampled_from(sorted(kinds_of_change(shape))).flatmap(changes_of_shape))
    def refused(changes: list[Change]) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(shutil.copytree(backup, Path(scratch) / "backup"))
            assume(applied(copy / name, changes))
            status, out, err = run(home, "restore", str(copy), *options)
            assert status == 1, (changes, out, err)
            assert len(err.splitlines()) == 1, (changes, err)
            assert (
                err
                == f"coop: backup {copy}/{name}: {check(name, copy / name)}; nothing was restored\n"
            )
            assert snapshot(home) == before, changes
            refusals.append(err)

    refused()
    assert refusals, "no example changed the schema"
    assert run(home, "list")[0] == 0
