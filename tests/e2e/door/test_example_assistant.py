"""examples/assistant_app.py, run for real: the assistant holds the Chief, mounts the door, and
answers a chat message inside a turn; a Coop line and a cron line that arrive during that turn
are durable at once and land after the reply, never between the owner's message and the answer.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.door.conftest import NOTIFY_URL, Harness
from tests.support.door import key_headers
from tests.support.procs import socket_client
from tests.support.waiting import wait_until_sync

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "assistant_app.py"
# The stand-in model's turn ends when the test creates this file in the harness folder, once
# both reports are queued (the test checks from the stored times that they arrived inside the
# turn); THINK_S only caps it, so a slow start cannot end the turn early.
RELEASE_FILE = "release-the-model"
THINK_S = "60"
TIMEOUT_S = 30.0


class Assistant:
    """The example as a process; its log (JSON lines on stderr) read by a thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()
        try:
            listening = wait_until_sync(
                lambda: self.event("assistant.listening") or self.proc.poll() is not None,
                timeout_s=TIMEOUT_S,
                what="the example to listen",
            )
            assert isinstance(listening, dict), "".join(self.lines)
        except BaseException:
            self.close()
            raise
        self.socket_path = str(listening["socket"])  # the door's, <folder>/door.sock

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def event(self, name: str) -> dict[str, object] | None:
        for line in list(self.lines):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == name:
                return entry
        return None

    def close(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(TIMEOUT_S)
        self.pump.join(TIMEOUT_S)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


@pytest.fixture
def assistant(harness: Harness) -> Iterator[Assistant]:
    app = Assistant(
        harness.env(EXAMPLE_THINK_S=THINK_S, EXAMPLE_THINK_UNTIL=str(harness.folder / RELEASE_FILE))
    )
    try:
        yield app
    finally:
        app.close()


def messages(folder: Path) -> list[tuple[int, str, str, str | None, str]]:
    with sqlite3.connect(folder / "chief.db") as conn:
        return conn.execute(
            "SELECT id, role, turn_kind, external_request_id, created_at FROM messages ORDER BY id"
        ).fetchall()


def queued(folder: Path) -> int:
    with sqlite3.connect(folder / "chief.db") as conn:
        (count,) = conn.execute("SELECT count(*) FROM chief_report_outbox").fetchone()
    return int(count)


def queued_at(folder: Path, key: str) -> str:
    with sqlite3.connect(folder / "chief.db") as conn:
        (created_at,) = conn.execute(
            "SELECT created_at FROM chief_report_outbox WHERE source_key = ?", (key,)
        ).fetchone()
    return str(created_at)


def test_reports_during_a_chat_turn_land_after_the_reply(
    harness: Harness, assistant: Assistant
) -> None:
    answers: dict[str, httpx.Response] = {}

    def post(name: str, path: str, **kwargs: object) -> None:
        with socket_client(assistant.socket_path, TIMEOUT_S) as client:
            answers[name] = client.post(path, **kwargs)  # type: ignore[arg-type]

    chat = threading.Thread(target=post, args=("chat", "/chat"), kwargs={"json": {"text": "hi"}})
    chat.start()
    wait_until_sync(
        lambda: (harness.folder / "chief.db").exists() and messages(harness.folder),
        timeout_s=TIMEOUT_S,
        what="the owner's message, written inside the turn",
    )
    # During the turn: a Coop line through the mounted notify door, and a cron line.
    notify = threading.Thread(
        target=post,
        args=("notify", NOTIFY_URL),
        kwargs={
            "json": {"text": "todo #7 done", "kind": "todo_done", "outbox_id": "7"},
            "headers": key_headers(),
        },
    )
    notify.start()
    args = ["--source", "cron:backup", "--fire", "1", "--wait", "0", "backup ok"]
    cron = subprocess.run(
        [sys.executable, "-m", "chief", "report", *args],
        env=harness.env(),  # to the assistant on <folder>/door.sock, where it looks
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert cron.returncode == 0, cron.stderr
    assert "will land when it is free" in cron.stdout
    wait_until_sync(
        lambda: queued(harness.folder) == 2, timeout_s=TIMEOUT_S, what="both reports queued"
    )
    (harness.folder / RELEASE_FILE).touch()  # the model answers: the turn ends
    chat.join(TIMEOUT_S)
    notify.join(TIMEOUT_S)
    assert answers["chat"].status_code == 200, answers["chat"].text
    assert answers["notify"].status_code == 200, answers["notify"].text
    reply = answers["chat"].json()
    wait_until_sync(
        lambda: len(messages(harness.folder)) == 4, timeout_s=TIMEOUT_S, what="both reports"
    )
    rows = messages(harness.folder)
    assert [row[0] for row in rows[:2]] == [reply["user_message_id"], reply["reply_message_id"]]
    assert [(row[1], row[2]) for row in rows[:2]] == [("user", "chat"), ("assistant", "chat")]
    landed = {str(row[3]): row for row in rows[2:]}
    assert set(landed) == {"chief-report:coop-notify:7", "chief-report:cron:backup:1"}
    reply_written_at = rows[1][4]
    for key in landed:
        # Both arrived (durably) while the turn was held, and landed after its reply.
        assert queued_at(harness.folder, key) < reply_written_at
    # The Coop line rang Telegram once; the cron line rang nothing.
    assert [message["text"] for message in harness.emulator.messages] == ["todo #7 done"]
    assert assistant.close() == 0
