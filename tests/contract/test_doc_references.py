"""Every file and every dotted name the docs cite exists: README.md, docs/*.md, bench/README.md
and the module docstring of every module of engine/, notifier/, chief/, bench/ and examples/.

What counts as a citation (anything else is prose, a command or an example, and is not checked):

- in Markdown, the tokens of inline code spans, fenced code blocks and link targets; in a module
  docstring, every token (its file lists are often bare: `verbs.py   the verbs`). A token is cut
  at whitespace, backticks, brackets, quotes and commas, and loses a trailing `.`, `:` or `;`.
  Tokens holding a placeholder or an expression (`<`, `>`, `{`, `*`, `$`, `=`, `|`, `@`, `...`,
  `://`) are examples, not citations.
- a **file**: a token that starts with one of the repository's top-level folders
  (`engine/`, `notifier/`, `chief/`, `ops/`, `bench/`, `tests/`, `docs/`, `examples/`), or ends
  with a source or document suffix (`.py`, `.md`, `.toml`, `.service`, `.timer`, `.ini`, `.cfg`,
  `.sh`, `.yml`, `.yaml`). It must exist (file or folder) relative to the repository root, or to
  the citing file's folder (a package docstring names its modules by bare file name), or, for a
  systemd unit named alone (`coop-engine.service`), to `ops/systemd/`. A `#anchor` or `:line`
  after it is dropped. An absolute path (`/etc/coop/coop.env`) is a place on a machine, and a
  token starting with `.` a suffix or a local folder (`.venv/bin`): neither is a file of the
  repository. In a fenced block only the paths rooted in a top-level folder count.
- a **dotted name**: a token `engine.x`, `notifier.x` or `chief.x` (dots and identifiers only,
  a trailing `()` dropped). It must import as a module, or resolve as a module and attributes
  below it, or be a string the code itself uses (a log event such as `notifier.daemon.started`,
  a logger or a fault point's name). The code names a `Chief` instance `chief`, so `chief.turn`
  may also be an attribute of `chief.conversation.Chief`. Data files named like packages
  (`chief.db`, `coop.db`) are not names.

The pages themselves: README.md is a front page under `README_MAX_LINES` lines, and every
Markdown link between the pages resolves as a reader's viewer resolves it, relative to the page
that holds it: the file exists, and a `#anchor` names a heading of that page (its GitHub slug).
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "notifier", "chief")
TOP_FOLDERS = (*PACKAGES, "ops", "bench", "tests", "docs", "examples")
FILE_SUFFIXES = (
    ".py",
    ".md",
    ".toml",
    ".service",
    ".timer",
    ".ini",
    ".cfg",
    ".sh",
    ".yml",
    ".yaml",
)
EXAMPLE_MARKS = ("<", ">", "{", "}", "*", "$", "=", "|", "@", "...", "://")
UNIT_SUFFIXES = (".service", ".timer")
# The code names a `Chief` instance `chief`: `chief.turn()` may be that method.
INSTANCE_CLASSES = {"chief": "chief.conversation.Chief"}
DATA_PARTS = frozenset({"db", "json", "jsonl", "key", "lock", "log", "kick"})
TOKEN_SPLIT = re.compile(r"[\s`()\[\]\"',]+")
DOTTED = re.compile(r"(?:engine|notifier|chief)(?:\.[A-Za-z_]\w*)+")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
README_MAX_LINES = 200
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


def package_modules(folders: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def markdown_citations(text: str) -> Iterator[str]:
    for block in FENCE.findall(text):
        # Commands and examples: only paths rooted in the repository (`ops/run`), not the
        # operator's own files (`backup.sh` in a crontab line).
        yield from (token for token in TOKEN_SPLIT.split(block) if is_rooted(clean(token)))
    prose = FENCE.sub("", text)
    for span in INLINE.findall(prose):
        yield from TOKEN_SPLIT.split(span)
    yield from LINK.findall(prose)


def docstring_citations(path: Path) -> Iterator[str]:
    docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)))
    if docstring:
        yield from TOKEN_SPLIT.split(docstring)


def clean(token: str) -> str:
    return token.rstrip(".:;")


def is_example(token: str) -> bool:
    return any(mark in token for mark in EXAMPLE_MARKS)


def is_rooted(token: str) -> bool:
    return "/" in token and token.split("/", 1)[0] in TOP_FOLDERS


def is_file_citation(token: str) -> bool:
    if token.startswith(("/", ".")):  # a place on a machine, a suffix, `.venv/bin`
        return False
    return is_rooted(token) or token.endswith(FILE_SUFFIXES)


def file_exists(token: str, near: Path) -> bool:
    path = token.split("#", 1)[0]
    path = re.sub(r":\d+$", "", path)
    bases = [ROOT, near.parent]
    if path.endswith(UNIT_SUFFIXES):
        bases.append(ROOT / "ops" / "systemd")  # a unit is named by its name alone
    return any((base / path).exists() for base in bases)


@cache
def code_strings() -> frozenset[str]:
    """Every string constant in the three packages: log events, logger and fault point names."""
    found: set[str] = set()
    for path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return frozenset(found)


def name_resolves(name: str) -> bool:
    parts = name.split(".")
    instance_of = INSTANCE_CLASSES.get(parts[0])
    if len(parts) == 2 and instance_of is not None:  # `instance.attribute`
        module, _, cls = instance_of.rpartition(".")
        if hasattr(getattr(importlib.import_module(module), cls), parts[1]):
            return True
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return name in code_strings()
            target = getattr(target, attribute)
        return True
    return False


def stale(tokens: Iterator[str], near: Path) -> list[str]:
    """The citations among `tokens` that name nothing (in order, once each)."""
    missing: list[str] = []
    for raw in tokens:
        token = clean(raw)
        if not token or is_example(token) or token in missing:
            continue
        if is_file_citation(token):
            if not file_exists(token, near):
                missing.append(token)
            continue
        name = token.removesuffix("()")
        if not DOTTED.fullmatch(name) or DATA_PARTS & set(name.split(".")[1:]):
            continue
        if not name_resolves(name):
            missing.append(token)
    return missing


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_file_and_name_a_document_cites_exists(doc: Path) -> None:
    assert stale(markdown_citations(doc.read_text()), doc) == []


def test_every_file_and_name_a_module_docstring_cites_exists() -> None:
    found = {
        str(path.relative_to(ROOT)): missing
        for path in package_modules((*PACKAGES, "bench", "examples"))
        if (missing := stale(docstring_citations(path), path))
    }
    assert found == {}


def test_the_rule_finds_what_it_must() -> None:
    """The checker itself: a missing file, a missing module or attribute, each kind of citation
    (the stale claims it was written against), and what it must leave alone."""
    here = ROOT / "chief" / "door" / "__init__.py"
    assert stale(iter(["service.py", "serving.py", "verbs.py", "DESIGN.md"]), here) == [
        "service.py",
        "serving.py",
        "DESIGN.md",
    ]
    assert stale(
        iter(["engine.store.queue", "engine.store.nothing", "chief.phone.ringer"]), here
    ) == ["engine.store.nothing"]
    assert (
        stale(iter(["notifier.daemon.started", "chief.db", "coop.db", "/etc/coop/x.toml"]), here)
        == []
    )
    assert stale(iter(["<coop.db>.owner.json", "tests/e2e/nowhere/", "ops/run"]), here) == [
        "tests/e2e/nowhere/"
    ]
    markdown = "a `chief.door.gone()` and [x](docs/gone.md), `coop todo add x`\n"
    assert stale(markdown_citations(markdown), ROOT / "README.md") == [
        "chief.door.gone",
        "docs/gone.md",
    ]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`."""
    kept = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(heading) for heading in HEADING.findall(FENCE.sub("", page.read_text()))}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (
            anchor and (linked.suffix != ".md" or anchor not in anchors(linked))
        ):
            broken.append(target)
    return broken


def test_the_readme_is_a_front_page() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move reference to docs/"


@pytest.mark.parametrize("doc", markdown_files(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_between_the_pages_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_link_rule_finds_what_it_must(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B page\n## Back up and restore: `coop backup`\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](docs/b.md#back-up-and-restore-coop-backup) [gone](docs/c.md#a) [x](docs/b.md#nope)"
        " [self](#a) [web](https://example.org/x#y)\n# A\n"
    )
    assert broken_links(page) == ["docs/c.md#a", "docs/b.md#nope"]
