"""`chief report`: a scheduled job's line lands in the Master Chief exactly once per source key,
under the turn lock, whether `chief serve` runs or not; real processes throughout (the command,
`chief serve`, a host application holding a turn), chief.db read with a second connection."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.door.conftest import Harness, spawn_door
from tests.e2e.door.turn_holder import REPLY_TEXT, USER_TEXT
from tests.support.waiting import wait_until_sync

# A long run (tens of seconds on a loaded machine): scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

COMMAND_TIMEOUT_S = 30.0
HOLDER = Path(__file__).with_name("turn_holder.py")


def chief_report(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chief", "report", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def rows(folder: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(folder / "chief.db") as conn:
        return conn.execute(sql, params).fetchall()


def conversation(folder: Path) -> list[tuple[object, ...]]:
    return rows(
        folder,
        "SELECT id, role, turn_kind, origin, external_request_id, content FROM messages "
        "ORDER BY id",
    )


def test_without_a_door_the_command_lands_the_line_itself_once_per_fire(
    harness: Harness,
) -> None:
    env = harness.env()
    first = chief_report(env, "--source", "cron:backup", "--fire", "2026-11-30T06:00", "3 GB ok")
    assert first.returncode == 0, first.stderr
    assert "landed as message #1" in first.stdout
    assert "by this process" in first.stdout
    assert first.stderr == ""  # cron mails whatever lands on stderr: a quiet success
    again = chief_report(env, "--source", "cron:backup", "--fire", "2026-11-30T06:00", "3 GB ok")
    assert again.returncode == 0, again.stderr
    assert "already landed as message #1; nothing new" in again.stdout
    assert conversation(harness.folder) == [
        (
            1,
            "assistant",
            "cron",
            "scheduled_task",
            "chief-report:cron:backup:2026-11-30T06:00",
            "3 GB ok",
        )
    ]
    # Without --fire each run is its own fire.
    other = chief_report(env, "--source", "cron:backup", "4 GB ok")
    assert other.returncode == 0, other.stderr
    assert len(conversation(harness.folder)) == 2
    assert harness.emulator.messages == []  # no Telegram ring for cron lines


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--source", "coop-notify:3", "text"], "--source must be cron:NAME"),
        (["--source", "cron:", "text"], "--source must be cron:NAME"),
        (["--source", "cron:a b", "text"], "--source must be cron:NAME"),
        (["--source", "cron:job", "--fire", "a b", "text"], "--fire must be"),
        (["--source", "cron:job", "   "], "report text is empty"),
        (["--source", "cron:job", ""], "report text is empty"),
        (["--source", "cron:job", "--wait", "-1", "text"], "--wait must be seconds"),
        (["--source", "cron:job", "x" * 4001], "at most 4000"),
        (["text"], "the following arguments are required: --source"),
    ],
)
def test_a_bad_source_or_empty_text_is_one_line_and_exit_2(
    harness: Harness, args: list[str], words: str
) -> None:
    done = chief_report(harness.env(), *args)
    assert done.returncode == 2
    assert words in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert not (harness.folder / "chief.db").exists()  # nothing written


def test_text_that_is_not_utf8_is_one_line_and_exit_2(harness: Harness) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chief", "report", "--source", "cron:job", b"bad \xff byte"],
        env=harness.env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "chief report: report text is not valid UTF-8 — pass it as UTF-8 text"
    )


def test_with_chief_serve_running_the_door_lands_the_line(harness: Harness) -> None:
    door = spawn_door(harness.env())
    env = harness.env()  # the door is on <folder>/door.sock, where the command looks
    done = chief_report(env, "--source", "cron:backup", "--fire", "f1", "nightly backup ok")
    assert done.returncode == 0, done.stderr
    assert "by the running door" in done.stdout
    again = chief_report(env, "--source", "cron:backup", "--fire", "f1", "nightly backup ok")
    assert "already landed" in again.stdout
    lines = conversation(harness.folder)
    assert [(row[2], row[4]) for row in lines] == [("cron", "chief-report:cron:backup:f1")]
    assert door.events("door.cron_report")
    assert harness.emulator.messages == []  # the door rang nothing for it
    assert door.proc.poll() is None  # and still serves
    assert door.terminate() == 0


def test_a_door_refusing_the_key_is_one_line_and_exit_1_with_the_line_kept(
    harness: Harness,
) -> None:
    door = spawn_door(harness.env())
    wrong = harness.folder / "wrong.key"
    wrong.write_text("not-the-door-key\n")
    wrong.chmod(0o600)
    env = harness.env(COOP_SERVICE_KEY_FILE=str(wrong))
    done = chief_report(env, "--source", "cron:backup", "--fire", "f1", "backup ok")
    assert done.returncode == 1
    assert "the running door refused it (401 service_key_invalid)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    queued = rows(harness.folder, "SELECT source_key, message_id FROM chief_report_outbox")
    assert queued == [("chief-report:cron:backup:f1", None)]  # durable, lands later
    assert door.terminate() == 0


class Holder:
    """The host application of turn_holder.py, driven over its stdin."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HOLDER)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            self.socket = self.expect("listening").split()[1]  # the folder's door.sock
        except BaseException:
            self.proc.kill()
            self.close()
            raise

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, word: str) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # bounded by the test's timeout
        assert line.startswith(word), line
        return line

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            try:
                self.proc.wait(COMMAND_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(COMMAND_TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def holder(harness: Harness) -> Iterator[Holder]:
    host = Holder(harness.env())
    try:
        yield host
    finally:
        host.close()


def test_a_turn_held_across_the_command_gets_the_line_after_its_reply(
    harness: Harness, holder: Holder
) -> None:
    env = harness.env()  # the holder serves the door on <folder>/door.sock, where it looks
    holder.send("hold")
    holder.expect("held")
    # A short wait runs out while the turn is held: exit 0, durable, not yet in the conversation.
    started = time.monotonic()
    short = chief_report(env, "--source", "cron:disk", "--fire", "f1", "--wait", "0.5", "disk 80%")
    assert time.monotonic() - started < 10.0
    assert short.returncode == 0, short.stderr
    assert "the line will land when it is free" in short.stdout
    queued = rows(harness.folder, "SELECT source_key, message_id FROM chief_report_outbox")
    assert queued == [("chief-report:cron:disk:f1", None)]
    assert [row[5] for row in conversation(harness.folder)] == [USER_TEXT]
    # A longer wait spans the release: the command lands its line after the reply.
    args = ["--source", "cron:mail", "--fire", "f1", "--wait", "20", "mail queue empty"]
    waiting = subprocess.Popen(
        [sys.executable, "-m", "chief", "report", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_sync(
            lambda: len(rows(harness.folder, "SELECT 1 FROM chief_report_outbox")) == 2,
            timeout_s=COMMAND_TIMEOUT_S,
            what="the second line to be queued durably before the turn ends",
        )
        assert waiting.poll() is None  # still waiting on the held turn
        holder.send("release")
        holder.expect("released")
        out, err = waiting.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, err
    assert "by the running door" in out
    wait_until_sync(
        lambda: len(conversation(harness.folder)) == 4,
        timeout_s=COMMAND_TIMEOUT_S,
        what="both cron lines to land",
    )
    lines = conversation(harness.folder)
    assert [row[5] for row in lines[:2]] == [USER_TEXT, REPLY_TEXT]  # never between the two
    assert sorted(str(row[4]) for row in lines[2:]) == [
        "chief-report:cron:disk:f1",
        "chief-report:cron:mail:f1",
    ]
    assert {row[2] for row in lines[2:]} == {"cron"}
    assert harness.emulator.messages == []


def test_with_the_holder_stopped_the_queued_line_lands_at_the_next_command(
    harness: Harness,
) -> None:
    # A host that held the turn until it stopped: its queued line is landed by the next
    # command that finds nobody holding the Chief (the Chief lands everything waiting).
    host = Holder(harness.env())
    try:
        env = harness.env()  # the host serves the door on <folder>/door.sock
        host.send("hold")
        host.expect("held")
        done = chief_report(env, "--source", "cron:a", "--fire", "1", "--wait", "0", "first")
        assert "will land when it is free" in done.stdout
    finally:
        host.proc.kill()  # dies inside its turn; the kernel drops its serve lock
        host.proc.wait(COMMAND_TIMEOUT_S)
        host.close()
    done = chief_report(harness.env(), "--source", "cron:b", "--fire", "1", "second")
    assert "by this process" in done.stdout, done.stderr
    keys = [row[4] for row in conversation(harness.folder)]
    assert keys == [None, "chief-report:cron:a:1", "chief-report:cron:b:1"]
