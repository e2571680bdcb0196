"""Every error class lives in its package's error module, in the tree its docstring draws.

A reader who meets an error finds it in one place per package (`engine.errors`,
`notifier.errors`, `chief.errors`), under the package's one root, drawn in that module's
docstring. Each package names one store error, and no package imports another's: the notifier
translates the engine's store failures into its own at one boundary (`notifier.delivery`).

`OUTSIDE` names the classes that still live elsewhere, each with why; a new one fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief")
ROOTS = {"engine": "CoopError", "notifier": "NotifierError", "chief": "ChiefError"}

#: Error classes defined outside their package's error module: (module path, class) -> why.
OUTSIDE = {
    # A subclass of python-telegram-bot's own NetworkError, so PTB's retry paths treat it as theirs.
    ("chief/telegram/sender.py", "AnswerLost"): "PTB's error type, at the Telegram seam",
    ("chief/telegram/sender.py", "AnswerUnreadable"): "AnswerLost's kind, at the Telegram seam",
    # The emulator's Bot API refusal, answered as Telegram's JSON, never raised past it.
    ("chief/telegram/emulator/shapes.py", "Refusal"): "the emulator answers it as the Bot API",
    # Control flow inside the quick parse, never raised past it.
    ("engine/cli/tree.py", "_Unsure"): "the quick parse hands the line to argparse",
}


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _error_classes(path: Path) -> list[str]:
    """The classes a module defines that look like errors: named *Error or deriving from a
    name that ends in Error, Exception or Unavailable, or from a class defined so above."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases]
        if (
            node.name.endswith("Error")
            or any(b.endswith(("Error", "Exception", "Unavailable")) for b in bases)
            or any(b in found for b in bases)
        ):
            found.append(node.name)
    return found


def _defined_in_errors_module(package: str) -> list[str]:
    return _error_classes(ROOT / package / "errors.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_error_class_lives_in_the_packages_error_module(package: str) -> None:
    strays = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _sources(package)
        if path.name != "errors.py" or path.parent != ROOT / package
        for name in _error_classes(path)
        if (str(path.relative_to(ROOT)), name) not in OUTSIDE
    ]
    assert not strays, f"define these in {package}/errors.py, in its tree: {strays}"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_error_modules_docstring_draws_every_class_under_one_root(package: str) -> None:
    module = ast.parse((ROOT / package / "errors.py").read_text())
    drawn = ast.get_docstring(module) or ""
    names = _defined_in_errors_module(package)
    assert names[0] == ROOTS[package]
    missing = [name for name in names if name not in drawn]
    assert not missing, f"{package}/errors.py defines {missing} but its docstring does not draw it"


@pytest.mark.parametrize("package", PACKAGES)
def test_one_store_error_per_package_and_none_borrowed(package: str) -> None:
    own = [name for name in _defined_in_errors_module(package) if name.endswith("StoreError")]
    assert len(own) == 1, f"{package}/errors.py defines {own or 'no'} store error"
    borrowed = []
    for path in _sources(package):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module is not None
                and node.module.split(".")[0] != package
                and any(alias.name.endswith("StoreError") for alias in node.names)
            ):
                borrowed.append(f"{path.relative_to(ROOT)}: from {node.module}")
    assert not borrowed, f"{package} imports another package's store error: {borrowed}"
