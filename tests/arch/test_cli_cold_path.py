"""The `coop` CLI's cold start, pinned without a clock: a local verb imports only the standard
library it needs and the engine, never the service stack or the standard library's heavy
conveniences (issue 14, "A cold CLI").

Each case runs the console script's own code (`from engine.cli import main`) as a fresh process
under `python -X importtime`, which names every module the process imports, and fails naming
what a verb pulled in that it must not. What each costs a cold start (measured with
`-X importtime`; bench/bench_cli.py times the whole process) is in bench/README.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.procs import clean_env

#: The console script's body (`.venv/bin/coop`), so the test sees exactly what a user's
#: `coop ...` imports, without `-m`'s runpy.
CONSOLE_SCRIPT = "import sys\nfrom engine.cli import main\nsys.exit(main())\n"

#: Never on a local verb's path: the service stack (the owner's app, the notifier's and the
#: door's libraries) and standard modules that cost a cold start milliseconds each.
FORBIDDEN = (
    # the service stack
    "httpx",
    "httpcore",
    "anyio",
    "fastapi",
    "starlette",
    "pydantic",
    "uvicorn",
    "structlog",
    "telegram",
    "aiosqlite",
    "asyncio",
    "logging",
    # standard conveniences a verb does without
    "pathlib",  # ~10 ms with urllib.parse and ipaddress; the verb path uses os.path
    "urllib",
    "ipaddress",
    "socket",  # only a kick imports it (COOP_KICK=off here)
    "dataclasses",  # ~25 ms with inspect
    "inspect",
    "shutil",  # argparse's default formatter asks it for the terminal's width
    "subprocess",  # only a kick that spawns a drainer
    "hashlib",
    "importlib.metadata",  # `--version` only
    "argparse",  # with gettext and locale: a plain line is parsed by engine.cli.tree
    "gettext",
    "locale",
    "email",
    "tempfile",
)

#: The base floor's modules a local verb may load: standard library only, each of them (the
#: `plumbing-cold` import contract in pyproject.toml holds that). The rest of `plumbing` (the
#: database thread on anyio, the logging set-up, the pid lock, the Unix sockets, the backup
#: check) is the services' and the operator commands'.
COLD_PLUMBING = frozenset(
    {
        "plumbing",
        "plumbing.bounds",
        "plumbing.faults",
        "plumbing.files",
        "plumbing.home",
        "plumbing.ids",
        "plumbing.keyfile",
        "plumbing.settings",
        "plumbing.terminal",
        "plumbing.wal",
        "plumbing.wire",
    }
)

#: A local verb: (arguments after `coop`, the setup each needs first).
VERBS: dict[str, tuple[list[str], list[list[str]]]] = {
    "todo add": (["todo", "add", "Water the plants"], []),
    "todo take": (["todo", "take", "1"], [["todo", "add", "x"]]),
    "todo done": (["todo", "done", "1", "--summary", "watered"], [["todo", "add", "x"]]),
    "request add": (["request", "add", "Review", "--to", "reviewer"], []),
    # A close wakes the waiters of `coop request wait`: with nobody waiting that is one failed
    # listdir, and no `socket` import.
    "request close": (["request", "close", "1", "--summary", "ok"], [["request", "add", "x"]]),
    # A read needs a ledger (one it does not find is refused, never created): a write first.
    "list": (["list", "--all"], [["todo", "add", "x"]]),
    "history": (["history", "todo", "1"], [["todo", "add", "x"]]),
    "notify": (["notify", "hello"], []),
    "outbox list": (["outbox", "list"], [["notify", "hello"]]),
}


def imported_modules(args: list[str], env: dict[str, str]) -> set[str]:
    """Every module `coop args...` imports, by name, from `-X importtime`'s report."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def coop_env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, COOP_ACTOR="builder", COOP_KICK="off")


@pytest.mark.parametrize("verb", VERBS)
def test_a_local_verb_imports_no_service_stack_and_no_heavy_stdlib(
    verb: str, tmp_path: Path
) -> None:
    args, setup = VERBS[verb]
    env = coop_env(tmp_path)
    for step in setup:
        subprocess.run(
            [sys.executable, "-c", CONSOLE_SCRIPT, *step], env=env, check=True, timeout=60
        )
    modules = imported_modules(args, env)
    assert "engine.cli" in modules, "the report names no engine module: the scan is broken"
    found = sorted(
        name
        for name in modules
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN)
    )
    assert not found, f"`coop {' '.join(args)}` imports {found}"
    floor = sorted(name for name in modules if name.split(".")[0] == "plumbing")
    assert set(floor) <= COLD_PLUMBING, f"`coop {' '.join(args)}` loads {floor}"


def test_help_imports_no_service_stack(tmp_path: Path) -> None:
    """`coop --help` builds the whole tree: still argparse and the engine only."""
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, "--help"],
        env=coop_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in run.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert not {"httpx", "structlog", "fastapi", "pathlib", "shutil"} & modules


def test_a_local_verb_does_not_import_typing(tmp_path: Path) -> None:
    env = coop_env(tmp_path)
    subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "todo", "add", "x"], env=env, check=True, timeout=60
    )
    modules = imported_modules(["todo", "done", "1"], env)
    assert "typing" not in modules
