"""A database file from outside (a backup about to be restored) checked before anything else
opens it, against what the package that owns it makes: its schema object by object, then its
integrity. SQLite's own advice for a database from an untrusted source, written once for the
ledger (`engine.backup_check`) and chief.db (`chief check-backup`), each of which supplies its
reference by running its own migrations on an in-memory database (`schema` reads it), never a
list kept by hand.

`check(path, ...)` answers the file's schema version, or raises ValueError whose words say the
first thing wrong, in this order:

    the file          unreadable, empty, not SQLite, shorter than its header or than the
                      pages its header counts, in WAL mode, or with a -wal or -journal beside
                      it (SQLite would read those too, and the restore's copy with them: a
                      backup is one self-contained file)
    the open          read-only and immutable (nothing beside the file is read or made),
                      `trusted_schema=OFF`, `query_only`, and SQLITE_DBCONFIG_DEFENSIVE where the
                      Python has `Connection.setconfig` (3.12+; on 3.11 the read-only connection
                      already refuses every write DEFENSIVE guards against)
    the version       `PRAGMA user_version` from the header: 0 or less is no database of the
                      owner's, past `newest` is a newer build's
    the size          the pages SQLite counts fill the file exactly (a cut file is refused even
                      where what is left still reads)
    the schema        every row of sqlite_master (type, name, table, SQL) exactly one of the
                      references at that version: an added trigger, index or view, a dropped or
                      altered table, each named
    the integrity     `PRAGMA integrity_check`, only once the schema is the owner's own, so the
                      CHECK constraints and partial indexes it evaluates are the owner's too

Standard library only, no import of `engine`, `notifier` or `chief` (an import contract holds
that); a sqlite3 or OS error is said in the ValueError's words, never raised as it is.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

#: One object of a schema: sqlite_master's type, name, table and SQL (NULL for an index SQLite
#: makes itself for a UNIQUE or PRIMARY KEY constraint).
Object = tuple[str, str, str, str | None]
Schema = frozenset[Object]

HEADER_BYTES = 100
MAGIC = b"SQLite format 3\x00"
#: Header bytes 18 and 19, the file format's write and read versions: 1 rollback journal, 2 WAL.
ROLLBACK_FORMAT = 1
#: The page size the header writes as 1 (it does not fit its two bytes).
MAX_PAGE_BYTES = 65536
#: Files SQLite reads beside a database and folds into what the database holds.
SIBLINGS = ("-wal", "-journal")
#: How many of integrity_check's lines a refusal quotes.
INTEGRITY_LINES = 3
#: Which kind of object a refusal names first: of the added or altered ones, those that run
#: code before those that hold data; of the missing ones, a table before what went with it.
FIRST_NAMED = ("trigger", "view", "index", "table")
FIRST_MISSING = ("table", "view", "trigger", "index")

__all__ = ["Object", "Schema", "built", "check", "open_untrusted", "schema"]


def schema(conn: sqlite3.Connection) -> Schema:
    """Every object of a connection's main database, as sqlite_master lists it."""
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master").fetchall()
    return frozenset(
        (str(t), str(n), str(tbl), None if s is None else str(s)) for t, n, tbl, s in rows
    )


def built(make: Callable[[sqlite3.Connection], object]) -> Schema:
    """The schema `make` builds on a fresh in-memory database: a package's reference, made by
    running its own migrations."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        make(conn)
        return schema(conn)
    finally:
        conn.close()


@contextlib.contextmanager
def open_untrusted(path: str) -> Iterator[sqlite3.Connection]:
    """`path` opened as SQLite advises for a file from outside: read-only, immutable (no lock,
    no journal, no -wal or -shm read or made), no function of its schema trusted."""
    from urllib.parse import quote

    uri = f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        setconfig = getattr(conn, "setconfig", None)  # Python 3.12+
        defensive = getattr(sqlite3, "SQLITE_DBCONFIG_DEFENSIVE", None)
        trusted = getattr(sqlite3, "SQLITE_DBCONFIG_TRUSTED_SCHEMA", None)
        if setconfig is not None and defensive is not None and trusted is not None:
            setconfig(defensive, True)
            setconfig(trusted, False)
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA cell_size_check = ON")
        yield conn
    finally:
        conn.close()


def check(
    path: str,
    *,
    newest: int,
    references: Callable[[int], Sequence[Schema]],
    maker: str,
    kind: str,
) -> int:
    """Check the database at `path` against what `maker` (e.g. "the ledger") makes; its schema
    version. `references(version)` gives the schemas a file at that version may have (1 to
    `newest`); `kind` names such a file in a refusal ("a Coop ledger")."""
    _check_file(path)
    try:
        with open_untrusted(path) as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version < 1:
                raise ValueError(f"it is not {kind} (schema version {version})")
            if version > newest:
                raise ValueError(
                    f"it is at schema version {version}, newer than this build's {newest}:"
                    " restore it with the build that wrote it, or upgrade this one first"
                )
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
            _check_size(int(pages), int(page_size), os.path.getsize(path))
            _check_schema(schema(conn), references(version), maker, version)
            verdict = [
                str(row[0]) for row in conn.execute(f"PRAGMA integrity_check({INTEGRITY_LINES})")
            ]
    except sqlite3.Error as exc:
        raise ValueError(f"it cannot be read as a database: {exc}") from None
    except OSError as exc:
        raise ValueError(f"it cannot be read: {exc.strerror or exc}") from None
    if verdict != ["ok"]:
        raise ValueError(f"it fails its integrity check: {'; '.join(verdict)}")
    return version


def _header(path: str) -> tuple[bytes, int]:
    """The file's first bytes and its size; a FIFO or a device is refused, never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"it cannot be read: {exc.strerror or exc}") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ValueError("it is not a regular file")
        return os.pread(fd, HEADER_BYTES, 0), status.st_size
    except OSError as exc:
        raise ValueError(f"it cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _check_file(path: str) -> None:
    header, size = _header(path)
    if not header:
        raise ValueError("it is empty: a zero-byte file, no database")
    if not header.startswith(MAGIC):
        raise ValueError("it is not an SQLite database")
    if len(header) < HEADER_BYTES:
        raise ValueError(f"it is cut short: {len(header)} bytes, less than a database's header")
    if header[18] != ROLLBACK_FORMAT or header[19] != ROLLBACK_FORMAT:
        raise ValueError(
            "it is in WAL mode, not one self-contained file (a backup's copy is switched to a"
            " rollback journal)"
        )
    pages = int.from_bytes(header[28:32], "big")
    if header[24:28] == header[92:96] and pages:  # the header's page count is current
        page_size = int.from_bytes(header[16:18], "big")
        _check_size(pages, MAX_PAGE_BYTES if page_size == 1 else page_size, size)
    for suffix in SIBLINGS:
        if os.path.lexists(path + suffix):
            raise ValueError(
                f"{os.path.basename(path)}{suffix} lies beside it, and SQLite would read it with"
                " the file: a backup is one self-contained file"
            )


def _check_size(pages: int, page_size: int, size: int) -> None:
    if pages * page_size != size:
        raise ValueError(
            f"it is cut short or padded: {pages} pages of {page_size} bytes make"
            f" {pages * page_size} bytes, the file holds {size}"
        )


def _check_schema(found: Schema, references: Sequence[Schema], maker: str, version: int) -> None:
    """Refuse unless `found` is one of `references`, naming the first difference from the
    nearest."""
    if found in references:
        return
    nearest = min(references, key=lambda reference: len(found ^ reference))
    raise ValueError(_difference(found, nearest, maker, version))


def _difference(found: Schema, reference: Schema, maker: str, version: int) -> str:
    expected = {(obj[0], obj[1]): obj for obj in reference}
    present = {(obj[0], obj[1]): obj for obj in found}
    added = _first(present.keys() - expected.keys(), FIRST_NAMED, present)
    if added is not None:
        return f"{_named(added)} is not one {maker} makes"
    # Nothing added: every object present is one the reference has.
    altered = _first((k for k in present if present[k] != expected[k]), FIRST_NAMED, present)
    if altered is not None:
        return f"{_named(altered)} is not as {maker} makes it"
    missing = _first(expected.keys() - present.keys(), FIRST_MISSING, expected)
    if missing is None:  # unreachable: the two schemas differ
        return f"its schema is not the one {maker} makes"
    return f"it lacks {_named(missing)}, which {maker} makes at schema version {version}"


def _first(
    keys: Iterable[tuple[str, str]], kinds: tuple[str, ...], objects: dict[tuple[str, str], Object]
) -> Object | None:
    """The object of `keys` a refusal names: by kind in the order of `kinds`, then by name; an
    index SQLite made for a constraint (no SQL of its own) after the rest, as its table says
    more."""

    def rank(key: tuple[str, str]) -> tuple[bool, int, tuple[str, str]]:
        kind = key[0]
        return (objects[key][3] is None, kinds.index(kind) if kind in kinds else len(kinds), key)

    ranked = sorted(keys, key=rank)
    return objects[ranked[0]] if ranked else None


def _named(obj: Object) -> str:
    kind, name, table, _ = obj
    return f"{kind} {name} on {table}" if kind in ("trigger", "index") else f"{kind} {name}"
