"""No function in engine/, notifier/ or chief/ is longer than a screen (the architecture suite;
STYLE.md: "functions fit on a screen").

Every function and method, nested ones included, is found by walking each module's syntax tree
and measured from its `def` line to its last line (docstring, comments and blank lines count:
they are what a reader scrolls past). A function over `MAX_FUNCTION_LINES` fails, unless
`ALLOWED` names it; an `ALLOWED` entry that is no longer too long fails too, so the list can
only shrink with the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief", "plumbing")
MAX_FUNCTION_LINES = 60

# Known long functions, by "module:qualified.name", each waiting to be split (none today).
ALLOWED: frozenset[str] = frozenset()


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def function_lengths(source: str) -> dict[str, int]:
    """Every function in `source` by qualified name (`Class.method`, `outer.inner`), with its
    length in lines from `def` to its last line."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                end = child.end_lineno if child.end_lineno is not None else child.lineno
                found[name] = end - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def long_functions(package: str) -> dict[str, int]:
    """`module:function` -> lines, for every function of `package` over the limit."""
    found: dict[str, int] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        module = module_name(path)
        for name, lines in function_lengths(path.read_text(encoding="utf-8")).items():
            if lines > MAX_FUNCTION_LINES:
                found[f"{module}:{name}"] = lines
    return found


def test_the_measure_counts_def_to_last_line_and_names_nested_functions() -> None:
    source = (
        "class A:\n"
        "    async def m(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "\n"
        "        return inner()\n"
        "def f(): pass\n"
    )
    assert function_lengths(source) == {"A.m": 5, "A.m.inner": 2, "f": 1}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_longer_than_a_screen(package: str) -> None:
    too_long = {
        name: lines for name, lines in long_functions(package).items() if name not in ALLOWED
    }
    assert not too_long, (
        f"functions over {MAX_FUNCTION_LINES} lines in {package}/ (split each into named parts): "
        + "; ".join(f"{name} ({lines} lines)" for name, lines in sorted(too_long.items()))
    )


def test_every_allowed_function_is_still_too_long() -> None:
    long = {name for package in PACKAGES for name in long_functions(package)}
    stale = sorted(ALLOWED - long)
    assert not stale, f"{stale} are no longer over {MAX_FUNCTION_LINES} lines: remove them"
