"""The logging twins: `chief.logs.configure_logging` and `notifier.logs.configure_logging`.

chief must not import the notifier, so each package configures structlog with its own copy of
one setup: JSON on stderr unless stderr is a terminal, the same processors, loggers not cached
(so `structlog.testing.capture_logs` sees them). The two functions are the same code but for
their docstrings and where they import structlog (the notifier imports it late: a drainer
that loses the worker lock never pays for it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def function_code(path: Path, name: str) -> list[str]:
    """The statements of the module-level function `name`, its docstring and imports left out."""
    tree = ast.parse(path.read_text())
    (function,) = (
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name
    )
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return [
        ast.dump(node) for node in body if not isinstance(node, ast.Import | ast.ImportFrom)
    ] + [ast.dump(function.args)]


def test_the_two_configure_logging_functions_are_the_same_code() -> None:
    chief = function_code(ROOT / "chief" / "logs.py", "configure_logging")
    notifier = function_code(ROOT / "notifier" / "logs.py", "configure_logging")
    assert chief == notifier
