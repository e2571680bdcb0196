"""The argv fuzz (issue 19, "close the class"): every verb of `coop` and of `chief`, with arbitrary
text, bytes that are not UTF-8, huge and negative integers, numbers that are not finite and empty
words in every argument position. Each run exits 0, 1 or 2, prints no traceback and at most two
lines of its own on stderr, and a run that exits non-zero leaves every file as it was
(tests/fuzz/argv.py says exactly what is checked).

The entry points run in-process (`main(argv)`, the console scripts' own code) on a fresh copy of
a seeded data folder per example, with no kick, no door (its socket refuses) and no network.
Two outside effects are stood in for: `coop serve`'s exec of the engine service and the uvicorn
run of `chief serve` and `chief telegram-emulator` (the stand-in checks what they would serve
on, a loopback port or a socket they bound, then returns as a stopped server does). `chief
telegram pair` meets no bot token here (every TELEGRAM_ setting is removed), so it refuses in
one line before it would reach Telegram or wait; its wait is bounded by `--timeout` besides. A
few real processes take random argv bytes: the decoding of argv (`surrogateescape`) happens only
there.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.cli
from chief import cli as chief_cli
from chief import loopback_http
from engine.cli.tree import COMMANDS as COOP_COMMANDS
from engine.cli.tree import COMMON
from tests.fuzz.argv import (
    Arg,
    Outcome,
    check,
    check_nothing_written,
    command_line,
    run_in_process,
    snapshot,
    sweep,
    working_folder,
)
from tests.support.door import OWNER, write_key
from tests.support.procs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

COOP_EXAMPLES_PER_VERB = 10
CHIEF_EXAMPLES_PER_VERB = 12
PROCESS_EXAMPLES = 3
FOREIGN_PREFIXES = ("COOP_", "CHIEF_", "TELEGRAM_", "PTB_")

COOP_VERBS = sorted(COOP_COMMANDS, key=lambda key: (key[0], key[1] or ""))
COOP_COMMON_ARGS = [((name,), {}) for name in COMMON]


def coop_words(key: tuple[str, str | None]) -> list[str]:
    return [key[0]] if key[1] is None else [key[0], key[1]]


def dispatched_args(command: str) -> list[Arg]:
    """A dispatched command's options, read from its own `--help`: a word in capitals after the
    option is its value."""
    help_text = run_in_process(chief_cli.main, [command, "--help"]).out
    found = []
    for match in re.finditer(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z-]*)( [A-Z_]+)?", help_text):
        if match[1] != "--help":
            found.append(((match[1],), {} if match[2] else {"action": "store_true"}))
    # `chief serve` takes no option (its settings are the environment's); any other command
    # whose help yields none means the reading above broke.
    assert found or command in OPTIONLESS, f"chief {command} --help names no option"
    assert f"usage: chief {command}" in help_text, help_text
    return found


CHIEF_VERBS = [*chief_cli.COMMANDS, *chief_cli.DISPATCHED]
OPTIONLESS = {"serve"}


def chief_args(command: str) -> list[Arg]:
    if command in chief_cli.COMMANDS:
        return list(chief_cli.COMMANDS[command].args)
    return dispatched_args(command)


# ---- the seeded folder and the environment ---------------------------------------------------


@pytest.fixture(scope="module")
def refused_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The door's socket, bound but never listening: a connection to it is refused at once."""
    folder = tmp_path_factory.mktemp("no-door")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(folder / "door.sock"))
        yield str(folder / "door.sock")


def set_environment(mp: pytest.MonkeyPatch, folder: Path, refused_socket: str) -> None:
    for name in list(os.environ):
        if name.startswith(FOREIGN_PREFIXES):
            mp.delenv(name)
    mp.setenv("COOP_HOME", str(folder))
    mp.setenv("COOP_KICK", "off")
    mp.setenv("COOP_ACTOR", "builder")
    mp.setenv("COOP_DOOR_SOCKET", refused_socket)
    mp.setenv("CHIEF_OWNER", OWNER)
    mp.setenv("CHIEF_METRICS_PORT", "off")


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory, refused_socket: str) -> Path:
    """A data folder with a ledger (todo #1 open, #2 taken by builder, request #1, a queued
    notification), a Chief's conversation with one line, and the service key."""
    folder = tmp_path_factory.mktemp("seed")
    write_key(folder)
    with pytest.MonkeyPatch.context() as mp:
        set_environment(mp, folder, refused_socket)
        for argv in (
            ["todo", "add", "open"],
            ["todo", "add", "taken"],
            ["todo", "take", "2"],
            ["request", "add", "r"],
            ["notify", "hello"],
        ):
            assert run_in_process(engine.cli.main, argv).code == 0, argv
        with restored_logging():
            landed = run_in_process(
                chief_cli.main, ["report", "--source", "cron:seed", "--fire", "1", "seed"]
            )
        assert landed.code == 0, landed.err
    return folder


#: The commands that block while a request is open (`coop request wait`, with no timeout or a
#: huge one): fuzzed on a copy of the seed where request #1 is closed, so every run answers at
#: once (0 for #1, 2 for an unknown id or a bad timeout).
WAITING = {("request", "wait")}


@pytest.fixture(scope="module")
def settled_seed(seed: Path, tmp_path_factory: pytest.TempPathFactory, refused_socket: str) -> Path:
    """The seed with no open request: request #1 closed."""
    folder = tmp_path_factory.mktemp("settled") / "seed"
    shutil.copytree(seed, folder)
    with pytest.MonkeyPatch.context() as mp:
        set_environment(mp, folder, refused_socket)
        assert run_in_process(engine.cli.main, ["request", "close", "1"]).code == 0
        listed = run_in_process(engine.cli.main, ["list", "--requests"])
    assert listed.out == "nothing open\n", listed.out
    return folder


@contextlib.contextmanager
def restored_logging() -> Iterator[None]:
    """The chief commands configure structlog for their process; the test process keeps its own."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


class Examples:
    """A fresh copy of the seed for each example, in the test's own folder."""

    def __init__(self, seed: Path, root: Path) -> None:
        self.seed = seed
        self.root = root
        self.count = itertools.count()

    def fresh(self) -> Path:
        folder = self.root / f"ex{next(self.count)}"
        shutil.copytree(self.seed, folder)
        return folder


@pytest.fixture
def examples(
    seed: Path, tmp_path: Path, refused_socket: str, monkeypatch: pytest.MonkeyPatch
) -> Examples:
    set_environment(monkeypatch, seed, refused_socket)
    # The outside effects: `coop serve` replacing the process, and a service binding its port.
    monkeypatch.setattr(engine.cli, "_exec_service", lambda: 0)
    monkeypatch.setattr(loopback_http, "run_server", _stand_in_server)
    monkeypatch.setattr(loopback_http, "run_servers", _stand_in_servers)
    return Examples(seed, tmp_path)


def _stand_in_server(app: object, *, host: str, port: int, event: str) -> bool:
    """uvicorn's run, stood in for: what it would have bound is checked; it returns as a server
    that started and stopped does."""
    assert 0 <= port <= 65535, f"{event}: would bind port {port}"
    assert loopback_http.is_loopback_host(host), f"{event}: would bind {host!r}"
    return True


def _stand_in_servers(listeners: list[loopback_http.Listener]) -> bool:
    """uvicorn's run of several listeners (`chief serve`: its socket, its /metrics), stood in
    for as `_stand_in_server`; a listener given sockets serves what its caller bound."""
    for listener in listeners:
        if listener.sockets is None:
            _stand_in_server(
                listener.app, host=listener.host, port=listener.port, event=listener.event
            )
    return True


def run_example(folder: Path, main: Any, argv: list[str], stdin: bytes = b"") -> Outcome:
    os.environ["COOP_HOME"] = str(folder)
    os.environ.pop("COOP_DB", None)  # `coop serve --db X` sets it for the service it starts
    before = snapshot(folder)
    with (
        working_folder(folder),
        restored_logging(),
        pytest.MonkeyPatch.context() as mp,
    ):
        mp.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        try:
            outcome = run_in_process(main, argv)
        finally:
            os.environ.pop("COOP_DB", None)  # nor may it outlive the example
    check(outcome, argv)
    if outcome.code != 0:
        check_nothing_written(before, snapshot(folder), argv)
    return outcome


# ---- the fuzz --------------------------------------------------------------------------------


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


def coop_required(verb: tuple[str, str | None]) -> list[Arg]:
    """The first option of each required exclusive group (none today; `cutover` had one)."""
    return [item.args[0] for item in COOP_COMMANDS[verb].args if getattr(item, "required", False)]


@pytest.mark.parametrize("verb", COOP_VERBS, ids=lambda key: " ".join(coop_words(key)))
def test_every_coop_verb_takes_any_argv_with_a_documented_exit_and_one_line(
    verb: tuple[str, str | None], examples: Examples, settled_seed: Path
) -> None:
    if verb in WAITING:
        examples = Examples(settled_seed, examples.root)
    args = [*COOP_COMMANDS[verb].arguments(), *COOP_COMMON_ARGS]
    for argv in sweep(coop_words(verb), args, coop_required(verb), common=list(COMMON)):
        run_example(examples.fresh(), engine.cli.main, argv)

    @fuzz_settings(COOP_EXAMPLES_PER_VERB)
    @given(argv=command_line(coop_words(verb), args))
    def fuzz(argv: list[str]) -> None:
        run_example(examples.fresh(), engine.cli.main, argv)

    fuzz()


@pytest.mark.parametrize("command", CHIEF_VERBS)
def test_every_chief_command_takes_any_argv_with_a_documented_exit_and_one_line(
    command: str, examples: Examples
) -> None:
    args = chief_args(command)
    required = [arg for arg in args if arg[1].get("required")]
    head = command.split()  # `telegram pair`: a command in a group
    for argv in sweep(head, args, required):
        run_example(examples.fresh(), chief_cli.main, argv)

    @fuzz_settings(CHIEF_EXAMPLES_PER_VERB)
    @given(argv=command_line(head, args), stdin=st.binary(max_size=64))
    def fuzz(argv: list[str], stdin: bytes) -> None:
        run_example(examples.fresh(), chief_cli.main, argv, stdin)

    fuzz()


def test_the_fuzz_reaches_every_verb_of_both_trees() -> None:
    """The verb lists are the CLIs' own tables: a new verb is fuzzed without a change here."""
    assert len(COOP_VERBS) == len(COOP_COMMANDS) >= 19
    assert {"log", "report", "serve", "telegram-emulator", "telegram pair"} <= set(CHIEF_VERBS)
    assert ("--flood-limits",) in [names for names, _ in dispatched_args("telegram-emulator")]
    assert dispatched_args("serve") == []  # still swept: bare, and with stray words


# ---- real processes: argv as bytes -----------------------------------------------------------

argv_bytes = st.lists(
    st.one_of(
        st.binary(min_size=1, max_size=6).filter(lambda word: b"\x00" not in word),
        st.sampled_from([b"\xff", b"caf\xe9", b"\xed\xa0\x80", b"1" * 20, b"-1", b""]),
    ),
    min_size=1,
    max_size=3,
)
PROCESS_HEADS = [
    ["engine", "notify"],
    ["engine", "todo", "done", "1", "--summary"],
    ["engine", "outbox", "cancel"],
    ["chief", "log", "--owner"],
]


@pytest.mark.parametrize("head", PROCESS_HEADS, ids=" ".join)
def test_argv_bytes_in_a_real_process_are_refused_in_one_line(
    head: list[str], examples: Examples
) -> None:
    @fuzz_settings(PROCESS_EXAMPLES)
    @given(tail=argv_bytes)
    def fuzz(tail: list[bytes]) -> None:
        folder = examples.fresh()
        env = {**os.environ, "COOP_HOME": str(folder), "PYTHONPATH": str(REPO)}
        before = snapshot(folder)
        done = subprocess.run(
            [sys.executable.encode(), b"-m", *(word.encode() for word in head), *tail],
            env=env,
            cwd=folder,
            capture_output=True,
            timeout=60,
            check=False,
        )
        err = done.stderr.decode("utf-8", "backslashreplace")
        check(Outcome(done.returncode, "", err), [*head, *map(repr, tail)])
        if done.returncode != 0:
            check_nothing_written(before, snapshot(folder), [*head, *map(repr, tail)])

    fuzz()
