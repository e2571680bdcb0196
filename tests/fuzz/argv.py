"""What the argv fuzz draws, and how it runs one command line and judges what it did.

Every command comes from the CLI's own tables, so a new verb or option is fuzzed without a
change here: `coop` from `engine.cli.tree.COMMANDS` (and `COMMON`), `chief` from
`chief.cli.COMMANDS`, and the commands `chief` dispatches (`chief.cli.DISPATCHED`) from their own
`--help`.

The contract each run is held to (the exit statuses are in docs/cli.md, "Exit statuses"):
- it exits 0, 1 or 2 (`--help` and `--version` exit 0 through argparse);
- no exception escapes `main`, and stderr holds no traceback and at most two lines of the
  entry point's own (a service's JSON log lines are not its words);
- a command that exits non-zero changes no file that was there before, and a ledger it created
  on its way to the refusal holds no row.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

EXIT_STATUSES = {0, 1, 2}
MAX_OWN_STDERR_LINES = 2

#: What argv may hold that a command must refuse or take: empty and blank words, option-looking
#: words, newlines, bytes that are not UTF-8 as Python's argv carries them (`\udc80`-`\udcff`), a
#: surrogate no decoding makes, NUL (only an in-process caller can pass one), numbers that are
#: not finite or do not fit 64 bits, digits int() takes from other scripts, and a number longer
#: than int() converts.
ODD_WORDS = [
    "",
    " ",
    "-",
    "--",
    "-1",
    "--help",
    "\n",
    "x\n",
    "cron:backup\n",
    "\udcff",
    "caf\udce9",
    "\ud800",
    "a\x00b",
    "😀",
    "\u202eevil",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "0x10",
    "１２",
    "1_000",
    str(2**63 - 1),
    str(2**63),
    str(-(2**63)),
    str(-(2**63) - 1),
    str(10**23),
    "9" * 5000,
    "x" * 4001,
]
NOT_UTF8 = [chr(code) for code in range(0xDC80, 0xDD00, 7)]

words = st.one_of(
    st.sampled_from(ODD_WORDS),
    st.text(max_size=12),
    st.lists(st.one_of(st.characters(), st.sampled_from(NOT_UTF8)), min_size=1, max_size=8).map(
        "".join
    ),
    st.integers().map(str),
    st.integers(min_value=-3, max_value=8).map(str),
    st.floats().map(str),
)


def _a_safe_path(word: str) -> bool:
    """A path argument stays inside the example's folder (the process may run as root): no
    absolute path, no home, no parent."""
    return not word.startswith(("/", "~")) and ".." not in word


paths = words.filter(_a_safe_path)

#: Arguments that name a file or folder the command creates or opens: drawn from `paths`
#: (`dir`: `coop backup DIR` creates it, `coop restore DIR` reads it).
PATH_OPTIONS = {"--db", "--log", "dir"}
#: Arguments converted to a number by the command rather than by argparse's `type`.
NUMBER_OPTIONS = {"--wait", "--port", "--max-pending-age", "--limit"}

Arg = tuple[tuple[str, ...], dict[str, Any]]


#: For an argument that converts its word to a number: the edges of what fits, past them, and
#: what is not a finite number.
NUMBER_WORDS = [
    str(2**63),
    str(-(2**63) - 1),
    str(10**23),
    str(2**63 - 1),
    str(-(2**63)),
    "9" * 5000,
    "0",
    "-1",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "65535",
    "65536",
    "99999",
]
# Hypothesis draws the first branch of a `one_of` most often in a short run: the hostile words
# come first, a plain one (which lets the command go on to its later checks) after them.
numbers = st.one_of(
    st.sampled_from(NUMBER_WORDS),
    st.integers(min_value=-2, max_value=5).map(str),
    st.integers().map(str),
    words,
)
texts = st.one_of(
    st.sampled_from(ODD_WORDS),
    st.lists(st.sampled_from(NOT_UTF8), min_size=1, max_size=2).map("".join),
    st.sampled_from(["x", "builder", "owner", "cron:backup", "http://127.0.0.1:9"]),
    words,
)


def _value(draw: st.DrawFn, names: tuple[str, ...], settings: dict[str, Any]) -> str:
    choices = settings.get("choices")
    if choices and draw(st.booleans()):
        return str(draw(st.sampled_from(list(choices))))
    if names[0] in PATH_OPTIONS:
        return draw(paths)
    if settings.get("type") is not None or names[0] in NUMBER_OPTIONS:
        return draw(numbers)
    return draw(texts)


@st.composite
def command_line(draw: st.DrawFn, head: Sequence[str], args: Sequence[Arg]) -> list[str]:
    """`head` (the command's words), then each argument of `args` or not, in any order, each
    option as `--x V` or `--x=V`, and sometimes a stray word."""
    pieces: list[list[str]] = []
    for names, settings in args:
        positional = not names[0].startswith("-")
        if not draw(st.integers(0, 9) if positional else st.booleans()):
            continue  # a positional is left out one time in ten
        if positional:
            pieces.append([_value(draw, names, settings)])
        elif settings.get("action") in ("store_true", "store_const", "version"):
            pieces.append([names[0]])
        elif draw(st.booleans()):
            pieces.append([f"{names[0]}={_value(draw, names, settings)}"])
        else:
            pieces.append([names[0], _value(draw, names, settings)])
    if draw(st.integers(0, 5)) == 0:
        # A stray word can stand in for a path positional left out: a path then, too.
        takes_path = any(names[0] in PATH_OPTIONS for names, _ in args)
        pieces.append([draw(paths if takes_path else words)])
    ordered = draw(st.permutations(pieces))
    return [*head, *(word for piece in ordered for word in piece)]


#: One hostile word of each kind, which the sweep puts in every argument position in turn.
SWEEP_WORDS = [
    "\udcff",
    "a\x00b",
    "\ud800",
    str(2**63),
    str(-(2**63) - 1),
    "9" * 5000,
    "nan",
    "-inf",
    "",
    "-1",
    "x\n",
]
#: A plain value for an argument whose plain value is not "x" (or "1" for a number).
PLAIN = {
    "--source": "cron:fuzz",
    "--fire": "f1",
    "--socket": "/nonexistent/service.sock",
    "--wait": "0",
    "--port": "0",
    "--max-pending-age": "60",
    "--db": "coop.db",
}


def plain_value(names: tuple[str, ...], settings: dict[str, Any]) -> str:
    if names[0] in PLAIN:
        return PLAIN[names[0]]
    if settings.get("choices"):
        return str(next(iter(settings["choices"])))
    return "1" if settings.get("type") is not None else "x"


def sweep(
    head: Sequence[str],
    args: Sequence[Arg],
    required: Sequence[Arg],
    common: Sequence[str] = (),
) -> list[list[str]]:
    """Command lines that are plain but for one argument, which holds one of `SWEEP_WORDS`: every
    word in every position (the first also as `--x=V`), each positional and each `required`
    option given its plain value otherwise. The options in `common` are every command's and are
    held to one check for all: they get the words that are not text only."""
    found = []
    for index, (names, settings) in enumerate(args):
        if settings.get("action") in ("store_true", "store_const", "version"):
            continue
        for word in SWEEP_WORDS[:3] if names[0] in common else SWEEP_WORDS:
            if names[0] in PATH_OPTIONS and not _a_safe_path(word):
                continue
            forms = [[word]] if not names[0].startswith("-") else [[names[0], word]]
            if names[0].startswith("-") and word == SWEEP_WORDS[0]:
                forms.append([f"{names[0]}={word}"])
            for form in forms:
                line = list(head)
                for other, (other_names, other_settings) in enumerate(args):
                    if other == index:
                        line += form
                    elif not other_names[0].startswith("-"):
                        line.append(plain_value(other_names, other_settings))
                    elif (other_names, other_settings) in required:
                        line += [other_names[0], plain_value(other_names, other_settings)]
                found.append(line)
    return found


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    def own_lines(self) -> list[str]:
        """stderr's lines, less a service's JSON log lines."""
        return [line for line in self.err.splitlines() if not line.startswith("{")]


def run_in_process(main: Callable[[list[str]], int], argv: list[str]) -> Outcome:
    """`main(argv)` as its console script runs it: stdout strict UTF-8 and stderr with
    backslashes for what is not (as Python sets up a process's streams), `SystemExit` taken as
    the exit status. Any other exception escapes: that is a finding."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            out.flush()
            err.flush()
    return Outcome(code, out_bytes.getvalue().decode(), err_bytes.getvalue().decode())


def check(outcome: Outcome, argv: list[str]) -> None:
    said = f"argv={argv!r}\nexit={outcome.code}\nstderr={outcome.err[-2000:]}"
    assert outcome.code in EXIT_STATUSES, said
    assert "Traceback" not in outcome.err, said
    assert len(outcome.own_lines()) <= MAX_OWN_STDERR_LINES, said


# ---- what a refusal must leave as it was -----------------------------------------------------


def _database(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return list(conn.iterdump())


def snapshot(folder: Path) -> dict[str, Any]:
    """Every file under `folder`: a database as its rows (the bytes move with a checkpoint),
    anything else as its bytes; SQLite's side files and the lock files are not content."""
    state: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        name = path.name
        if not path.is_file() or name.endswith(("-wal", "-shm", "-journal", ".lock")):
            continue
        key = str(path.relative_to(folder))
        try:
            state[key] = _database(path) if _is_database(path) else path.read_bytes()
        except sqlite3.DatabaseError:
            state[key] = path.read_bytes()
    return state


def _is_database(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(16) == b"SQLite format 3\x00"


def rows_in(dump: Any) -> list[str]:
    return [line for line in dump if line.startswith("INSERT INTO")]


def check_nothing_written(before: dict[str, Any], after: dict[str, Any], argv: list[str]) -> None:
    for name, content in before.items():
        assert after.get(name) == content, f"argv={argv!r} changed {name}"
    for name in after.keys() - before.keys():
        content = after[name]
        assert isinstance(content, list), f"argv={argv!r} wrote {name}"
        assert not rows_in(content), f"argv={argv!r} wrote rows into {name}"


@contextlib.contextmanager
def working_folder(folder: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


def json_lines(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found
