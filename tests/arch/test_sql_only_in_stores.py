"""Only a package's store modules execute SQL (the architecture suite; `lint-imports` holds the
import contracts, see docs/architecture.md).

Every call of `execute(`, `executemany(` or `executescript(` in engine/, notifier/, chief/ and
plumbing/ is found by walking each module's syntax tree (so a docstring or a comment that
mentions one does not count) and must sit in a module listed in `SQL_MODULES`: each package's
store, nothing else (engine's is the package engine.store: connection, ledger, queue, command
log; the base floor's are two helpers that own no table). A listed
module that no longer executes SQL fails too, so the list can only shrink with the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief", "plumbing")
SQL_CALLS = frozenset({"execute", "executemany", "executescript"})

# Per package, the modules allowed to execute SQL. An entry names a module or a package (an
# entry `engine.store` also admits `engine.store.ledger` once the store is a package).
SQL_MODULES: dict[str, frozenset[str]] = {
    "engine": frozenset({"engine.store"}),
    # The notifier runs none: its use cases (notifier.delivery) call engine.store.queue, the one
    # owner of the queue tables' statements.
    "notifier": frozenset(),
    # chief's is the package chief.store: schema, reports, telegram, sql (the transaction).
    "chief": frozenset({"chief.store"}),
    # The base floor's: a backup's database read before anything trusts it, and the switch of a
    # fresh file to WAL both stores' openers call. No table's statements.
    "plumbing": frozenset({"plumbing.dbcheck", "plumbing.wal"}),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sql_calls(source: str) -> list[int]:
    """The line of every `<anything>.execute(...)`-like call in `source`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SQL_CALLS
    ]


def executing_modules(package: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        lines = sql_calls(path.read_text(encoding="utf-8"))
        if lines:
            found[module_name(path)] = lines
    return found


def allowed(module: str, entries: frozenset[str]) -> bool:
    return any(module == entry or module.startswith(entry + ".") for entry in entries)


def test_the_scan_sees_a_call_and_ignores_text() -> None:
    source = '"""conn.execute("SELECT 1") in a docstring"""\n# cur.execute(x)\nconn.execute("X")\n'
    assert sql_calls(source) == [3]


@pytest.mark.parametrize("package", PACKAGES)
def test_only_store_modules_execute_sql(package: str) -> None:
    entries = SQL_MODULES[package]
    outside = {
        module: lines
        for module, lines in executing_modules(package).items()
        if not allowed(module, entries)
    }
    assert not outside, (
        f"SQL outside {package}'s store modules (move it into the store, or, if this module is "
        f"a store, list it in SQL_MODULES): "
        + "; ".join(f"{m} lines {lines}" for m, lines in sorted(outside.items()))
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_listed_module_still_executes_sql(package: str) -> None:
    executing = executing_modules(package)
    stale = sorted(
        entry
        for entry in SQL_MODULES[package]
        if not any(allowed(module, frozenset({entry})) for module in executing)
    )
    assert not stale, f"{stale} no longer execute SQL: remove them from SQL_MODULES"
