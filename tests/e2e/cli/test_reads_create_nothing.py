"""A read command creates nothing (issue 34, "A wrong data folder silently makes an empty
ledger"): every `coop` command that only reads, run as a real process on a folder with no
ledger (a folder that does not exist, an empty one, and the default folder when COOP_HOME is
not set), says `no ledger at PATH (the setting that named it)` in one line, exits non-zero and
leaves no file and no folder behind; `status --check` is not healthy. The reads are derived
from the command tree (every verb marked `@reads`) plus the operator's reads, so a new read
verb is held to this too. Only a command that writes creates the ledger, and says so once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.tree import COMMANDS
from tests.support.procs import PROCESS_TIMEOUT_S, clean_env, write_key


def _filled(command_words: tuple[str, str | None]) -> list[str]:
    """The command's words and a value for each positional (its first choice, else `1`)."""
    words = [word for word in command_words if word is not None]
    for names, settings in COMMANDS[command_words].arguments():
        if not names[0].startswith("-"):
            choices = settings.get("choices")
            words.append(str(choices[0]) if choices else "1")
    return words


#: Every verb's command that only reads (`@reads`), each with and without --json where it has it.
VERB_READS = [
    _filled(words)
    for words, command in COMMANDS.items()
    if command.verb is not None and command.verb.__dict__.get("reads")
]
READS = {
    " ".join(args): args
    for args in [
        *VERB_READS,
        *([*args, "--json"] for args in VERB_READS if "--json" not in args),
        ["list", "--all"],
        ["request", "wait", "1", "--timeout", "0"],
        ["status"],
        ["status", "--json"],
        ["status", "--check"],
        ["backup", "backups"],  # a read of the ledger, into a folder it would create
    ]
}


def _coop(
    args: list[str], env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )


def _tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_the_reads_cover_every_read_verb_of_the_tree() -> None:
    assert {"todo show 1", "request show 1", "list", "history todo 1", "request wait 1"} <= set(
        READS
    )
    assert {"outbox list", "status --check"} <= set(READS)


@pytest.mark.parametrize("folder", ["missing", "empty", "default"])
@pytest.mark.parametrize("name", READS)
def test_a_read_on_a_folder_without_a_ledger_says_so_and_creates_nothing(
    tmp_path: Path, name: str, folder: str
) -> None:
    home = tmp_path / "home"  # HOME: the default data folder is under it
    home.mkdir()
    settings = {"HOME": str(home), "COOP_ACTOR": "builder", "COOP_KICK": "off"}
    if folder == "default":
        env = clean_env(None, **settings)
        env.pop("XDG_DATA_HOME", None)
        ledger = home / ".local" / "share" / "coop" / "coop.db"
        origin = f"(COOP_HOME is not set: the default folder {ledger.parent})"
    else:
        data = tmp_path / "data"
        if folder == "empty":
            data.mkdir()
        env = clean_env(data, **settings)
        ledger = data / "coop.db"
        origin = f"(COOP_HOME={data})"
    before = _tree(tmp_path)
    done = _coop(READS[name], env, cwd=tmp_path)  # `backup backups`: a folder in tmp_path
    assert done.returncode != 0, done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"coop: no ledger at {ledger} {origin}"), lines[0]
    assert done.stdout == ""
    assert _tree(tmp_path) == before, "a read created files or folders"


def test_the_retry_timers_drain_on_a_folder_without_a_ledger_creates_nothing(
    tmp_path: Path,
) -> None:
    # `coop-notifier drain --no-wait` is what the retry timer runs every minute, from the first
    # minute of a fresh install: nothing to drain, nothing made.
    data = tmp_path / "data"
    data.mkdir()
    write_key(data / "service.key", "k" * 32)
    env = clean_env(data)
    before = _tree(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "notifier", "drain", "--no-wait"],
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"outcome": "no_ledger"' in done.stderr, done.stderr
    assert _tree(tmp_path) == before, "a drain created files or folders"


def test_only_a_write_creates_the_ledger_and_says_so_the_first_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = clean_env(data, COOP_ACTOR="builder", COOP_KICK="off")
    first = _coop(["todo", "add", "Water the plants"], env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        f"coop: started a new ledger at {data}/coop.db (COOP_HOME={data})"
    ]
    second = _coop(["todo", "add", "Feed the cat"], env)
    assert (second.returncode, second.stderr) == (0, "")
    listed = _coop(["list"], env)
    assert listed.returncode == 0, listed.stderr
    assert "Water the plants" in listed.stdout


def test_a_library_read_raises_no_ledger_and_creates_nothing(tmp_path: Path) -> None:
    from engine import ledger
    from engine.errors import NoLedger

    with pytest.raises(NoLedger, match="no ledger at"):
        ledger.list_items(db=os.fspath(tmp_path / "nowhere" / "coop.db"))
    assert list(tmp_path.iterdir()) == []
