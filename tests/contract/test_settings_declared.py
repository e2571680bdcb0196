"""The settings declaration (`ops/settings.toml`) against the code and the two files rendered
from it: an environment read in engine/, notifier/, chief/ or plumbing/ that the declaration
lacks fails, and so does a declared setting missing from docs/configuration.md or
ops/coop.env.example, or either file differing from what `ops/settings --write` renders.

What counts as a read of a setting (by the package whose source holds it):
- every string constant that is a whole setting name, `COOP_*`, `CHIEF_*` or `TELEGRAM_*`
  (the code passes names around: `_seconds(env, "COOP_BACKOFF_BASE_S", ...)`, `FAULTS_ENV`);
- the literal name in `os.environ.get(...)`, `os.getenv(...)`, `os.environ[...]`, and the same
  on a mapping named `env` or `environ` (the system's variables, `HOME`, `COLUMNS`, ...).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from plumbing import door as door_address

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief", "plumbing")
SETTING_NAME = re.compile(r"(?:COOP|CHIEF|TELEGRAM)_[A-Z0-9_]+")
ENV_NAMES = frozenset({"env", "environ"})


def declared() -> list[dict]:
    with (ROOT / "ops" / "settings.toml").open("rb") as handle:
        return list(tomllib.load(handle)["setting"])


def is_environment(node: ast.expr) -> bool:
    """`env`, `environ`, `os.environ`."""
    if isinstance(node, ast.Name):
        return node.id in ENV_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def literal(node: ast.expr | None) -> str | None:
    ok = isinstance(node, ast.Constant) and isinstance(node.value, str)
    return node.value if ok else None  # type: ignore[union-attr]


def names_read(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if (name := literal(node)) and SETTING_NAME.fullmatch(name):  # type: ignore[arg-type]
            yield name
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            getter = isinstance(func, ast.Attribute) and (
                (func.attr == "get" and is_environment(func.value)) or func.attr == "getenv"
            )
            if getter and (name := literal(node.args[0])):
                yield name
        elif isinstance(node, ast.Subscript) and is_environment(node.value):
            yield from filter(None, [literal(node.slice)])


def reads_by_package() -> dict[str, set[str]]:
    return {
        package: {
            name
            for path in sorted((ROOT / package).rglob("*.py"))
            for name in names_read(path.read_text(encoding="utf-8"))
        }
        for package in PACKAGES
    }


def test_every_setting_the_code_reads_is_declared_with_who_reads_it() -> None:
    reads = reads_by_package()
    by_name = {setting["name"]: setting for setting in declared()}
    # The retired door settings are named only to be refused in one line (plumbing.door).
    named = {name for names in reads.values() for name in names} - set(door_address.RETIRED)
    undeclared = sorted(named - set(by_name))
    assert undeclared == [], f"declare these in ops/settings.toml: {undeclared}"
    unsaid = {
        name: sorted(readers - set(by_name[name]["read_by"]))
        for name in by_name
        if (readers := {package for package in PACKAGES if name in reads[package]})
        - set(by_name[name]["read_by"])
    }
    assert unsaid == {}, "packages reading a setting its read_by does not name"
    unread = [
        name
        for name, setting in by_name.items()
        if set(setting["read_by"]) & set(PACKAGES)
        and not any(name in reads[package] for package in PACKAGES)
    ]
    assert unread == [], "declared as read by a package that no longer reads it"


def test_every_declared_setting_is_in_the_configuration_page_and_the_example() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = (ROOT / "ops" / "coop.env.example").read_text(encoding="utf-8").splitlines()
    example_names = {line.lstrip("#").partition("=")[0] for line in example if "=" in line}
    for setting in declared():
        assert f"| `{setting['name']}` |" in page, setting["name"]
        if setting.get("kind", "setting") not in ("system", "retired"):
            assert setting["name"] in example_names, setting["name"]
        else:  # a retired setting in the example would stop the services that refuse it
            assert setting["name"] not in example_names, setting["name"]


def test_the_rendered_files_match_the_declaration() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "ops" / "settings")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_ops_settings_read_by_the_scripts_are_there() -> None:
    scripts = "".join(
        path.read_text(encoding="utf-8")
        for path in (ROOT / "ops").iterdir()
        if path.is_file() and path.name != "settings.toml"
    )
    missing = [
        setting["name"]
        for setting in declared()
        if "ops" in setting["read_by"] and setting["name"] not in scripts
    ]
    assert missing == []


def test_the_scan_finds_each_kind_of_read() -> None:
    source = """
import os
a = os.environ.get("COOP_NEW_THING", "1")
b = env["HOME"]
c = os.getenv("COLUMNS")
d = _seconds(env, "CHIEF_SOMETHING_S", 3)
e = environ.get("XDG_DATA_HOME", "")
f = "COOP_X is wrong: not a name"
g = os.environ.get(name)
"""
    assert sorted(set(names_read(source))) == [
        "CHIEF_SOMETHING_S",
        "COLUMNS",
        "COOP_NEW_THING",
        "HOME",
        "XDG_DATA_HOME",
    ]
