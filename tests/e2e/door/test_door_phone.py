"""The door's phone end to end: `chief serve`, the Bot API emulator and `coop serve` as real
processes (tests.support.stack), the owner played through the emulator's control endpoints
(tests.support.phone). The commands answer from the ledger service's summary and the door's own
queue; /quiet makes the next ring silent; strangers change nothing, are counted, and a flood of
them is one log line, not one per sender; an update is applied once, across a replay and a crash
after the door recorded it (before Telegram heard its confirmation); the commands are registered
at the start; and a stop while a long poll is open is prompt."""

from __future__ import annotations

import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chief.errors import EngineUnavailable, EngineUnreachable
from chief.phone.commands_text import (
    COMMANDS,
    HELP,
    HELP_FIRST_LINE,
    NOT_ANSWERING,
    NOT_RUNNING,
)
from chief.phone.engine_link import EngineLink
from chief.phone.updater import POLL_TIMEOUT_S
from tests.support.phone import EmulatorOwner
from tests.support.procs import coop
from tests.support.stack import CHAT_ID, NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER, Stack

pytestmark = pytest.mark.timeout(120)

OWNER_ID = int(CHAT_ID)  # a private chat: its id is its user's
STRANGER_ID = 777
ANSWER_S = 10.0  # a bound on the wait, far above the 2 s a command takes


class Phone:
    """The stack with the owner's phone: say something, read what the bot answered."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.owner = EmulatorOwner(stack.emulator.url)

    def __enter__(self) -> Phone:
        return self

    def __exit__(self, *_: object) -> None:
        self.owner.close()

    def bot_messages(self, chat: int = OWNER_ID) -> list[dict[str, Any]]:
        return [m for m in self.owner.messages() if m["chat_id"] == chat]

    def say(self, text: str, *, user: int = OWNER_ID, chat: int = OWNER_ID) -> int:
        return int(self.owner.text(chat, user, text)["update_id"])

    def ask(self, text: str, answer_starts: str = "") -> str:
        """Send `text` as the owner and return the bot's next message in the owner's chat that
        starts with `answer_starts` (a report rung meanwhile is not the answer)."""
        before = len(self.bot_messages())
        self.say(text)
        news = self.owner.wait_for(
            lambda _: [
                m for m in self.bot_messages()[before:] if m["text"].startswith(answer_starts)
            ],
            ANSWER_S,
            f"an answer to {text!r}",
        )
        return str(news[0]["text"])

    def notify(self, text: str) -> None:
        """A notify straight to the door, as the notifier posts one."""
        body = {"text": text, "kind": "todo.done", "outbox_id": "d-" + uuid.uuid4().hex}
        answer = self.stack.door_request(
            "POST",
            NOTIFY_PATH,
            json=body,
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=ANSWER_S,
        )
        assert answer.status_code == 200, answer.text

    def rung(self, text: str) -> dict[str, Any]:
        return self.owner.wait_for(
            lambda _: next((m for m in self.bot_messages() if m["text"] == text), None),
            ANSWER_S,
            f"{text!r} rung",
        )

    def metric(self, name: str) -> float:
        answer = self.stack.door_request(
            "GET",
            "/metrics",
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=ANSWER_S,
        )
        for line in answer.text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not in the door's /metrics")


def _stack(folder: Path) -> Stack:
    """A stack whose door asks `coop serve` on its socket in `folder` (both its default)."""
    return Stack(folder)


def _started(stack: Stack) -> Phone:
    stack.start_door()
    stack.door.wait_event("door.phone_commands_registered", "the commands registered")
    return Phone(stack)


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phone]:
    """One stack for the module's tests that leave it as they found it."""
    stack = _stack(tmp_path_factory.mktemp("phone"))
    try:
        with _started(stack) as started:
            stack.start_engine()
            yield started
        assert set(stack.stop().values()) == {0}
    finally:
        stack.close()


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack for a test that stops or crashes its parts."""
    stack = _stack(tmp_path)
    try:
        yield stack
    finally:
        stack.close()


def test_the_commands_are_registered_when_the_door_starts(phone: Phone) -> None:
    assert [(c["command"], c["description"]) for c in phone.owner.commands()] == list(COMMANDS)
    assert len(phone.stack.door.events("door.phone_commands_registered")) == 1


def test_help_an_unknown_command_and_start_once_paired(phone: Phone) -> None:
    assert phone.ask("/help", "I answer") == HELP
    assert phone.ask("/whatever", "I answer") == HELP_FIRST_LINE
    assert phone.ask("/start 123456", "Already").startswith("Already paired")


def test_status_todos_and_requests_read_the_ledger(phone: Phone) -> None:
    env = phone.stack.env()
    assert coop("todo", "add", "water the plants", env=env, inherit=False).returncode == 0
    choices = ("--choices", "approve,decline")
    added = coop(
        "request", "add", "order the bigger bag?", "--to", "owner", *choices, env=env, inherit=False
    )
    assert added.returncode == 0, added.stderr
    lines = phone.ask("/status", "Open:").splitlines()
    assert lines[0] == "Open: 1 todo, 1 request."
    assert lines[1].startswith("Oldest: todo #1 water the plants")
    assert lines[2].startswith("Notifications:")
    assert lines[3].startswith("Telegram queue:")
    assert phone.ask("/todos", "1 open").splitlines() == [
        "1 open todo:",
        "todo #1 water the plants",
    ]
    rung = len(_asks(phone))
    requests = phone.ask("/requests", "1 open").splitlines()
    assert requests == ["1 open request:", "#1: asked again, with its buttons"]
    again = phone.owner.wait_for(lambda _: _asks(phone)[rung:], ANSWER_S, "the ask rung again")
    labels = [b["text"] for row in again[0]["reply_markup"]["inline_keyboard"] for b in row]
    assert labels == ["approve", "decline"]


def _asks(phone: Phone) -> list[dict[str, Any]]:
    """The bot's messages in the owner's chat that carry buttons (asks) now."""
    return [m for m in phone.bot_messages() if (m.get("reply_markup") or {}).get("inline_keyboard")]


def test_status_without_coop_serve_says_so_and_still_shows_the_queue(phone: Phone) -> None:
    assert phone.stack.engine.terminate() == 0
    try:
        lines = phone.ask("/status", NOT_RUNNING).splitlines()
        assert lines[0] == NOT_RUNNING
        assert lines[1].startswith("Telegram queue:")
        assert phone.ask("/todos", NOT_RUNNING) == NOT_RUNNING
    finally:
        phone.stack.start_engine()


def test_status_while_coop_serve_is_stuck_still_answers(phone: Phone) -> None:
    engine = phone.stack.engine
    engine.popen.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        lines = phone.ask("/status", NOT_ANSWERING).splitlines()
        assert lines[0] == NOT_ANSWERING
        assert lines[1].startswith("Telegram queue:")
    finally:
        engine.popen.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    assert phone.ask("/status", "Open:").startswith("Open:")


async def test_the_engine_link_presents_the_key_and_names_each_failure(
    phone: Phone, tmp_path: Path
) -> None:
    path = phone.stack.engine.socket_path
    async with EngineLink(path, SERVICE_KEY).open() as link:
        assert (await link.summary())["owner"] == "owner"
    async with EngineLink(path, "not-the-key").open() as link:
        with pytest.raises(EngineUnavailable, match=r"40[13]") as refused:
            await link.summary()
        assert not isinstance(refused.value, EngineUnreachable)
    async with EngineLink(str(tmp_path / "nothing.sock"), SERVICE_KEY).open() as link:
        with pytest.raises(EngineUnreachable, match="not running"):
            await link.summary()
    # A socket in a folder another user could write: refused before the key is sent.
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with socket.socket(socket.AF_UNIX) as planted:
        planted.bind(str(shared / "service.sock"))
        planted.listen(1)
        planted.setblocking(False)
        async with EngineLink(str(shared / "service.sock"), SERVICE_KEY).open() as link:
            with pytest.raises(EngineUnavailable, match="not trusted") as untrusted:
                await link.summary()
        assert not isinstance(untrusted.value, EngineUnreachable)
        with pytest.raises(BlockingIOError):
            planted.accept()  # nobody connected


def test_quiet_makes_the_next_ring_silent_until_quiet_off(phone: Phone) -> None:
    assert phone.ask("/quiet 2h", "Quiet").startswith("Quiet for 2h")
    assert phone.ask("/quiet", "Quiet").startswith("Quiet is on")
    phone.notify("todo #5 done: while quiet")
    assert phone.rung("todo #5 done: while quiet")["disable_notification"] is True
    assert phone.ask("/quiet off", "Quiet").startswith("Quiet is off")
    phone.notify("todo #6 done: after quiet")
    assert phone.rung("todo #6 done: after quiet")["disable_notification"] is False
    assert phone.ask("/quiet 25h", "Say").startswith("Say /quiet 30m")


def test_strangers_change_nothing_learn_nothing_and_are_counted(phone: Phone) -> None:
    counted = phone.metric("coop_telegram_strangers_total")
    phone.say("/status", user=STRANGER_ID, chat=STRANGER_ID)
    phone.say("/quiet 2h", user=STRANGER_ID, chat=STRANGER_ID)
    phone.say("/help", user=STRANGER_ID + 1, chat=OWNER_ID)  # someone else in the owner's chat
    assert phone.ask("/quiet", "Quiet").startswith("Quiet is off")  # after the strangers
    assert phone.bot_messages(STRANGER_ID) == []
    assert phone.metric("coop_telegram_strangers_total") == counted + 3
    lines = phone.stack.door.events("door.telegram_strangers")
    assert 1 <= len(lines) <= 2  # the first at once; the rest summed up after the interval


def test_a_flood_of_strangers_is_counted_not_logged_one_line_each(phone: Phone) -> None:
    flood = 40
    counted = phone.metric("coop_telegram_strangers_total")
    lines = len(phone.stack.door.events("door.telegram_stranger"))  # the old one-per-sender line
    summaries = len(phone.stack.door.events("door.telegram_strangers"))
    for sender in range(50_000, 50_000 + flood):
        phone.say("/start 123456", user=sender, chat=sender)
    assert phone.ask("/help") == HELP  # after the flood, in order
    assert phone.metric("coop_telegram_strangers_total") == counted + flood
    assert len(phone.stack.door.events("door.telegram_stranger")) == lines
    assert len(phone.stack.door.events("door.telegram_strangers")) - summaries <= 1


def test_a_replayed_update_is_not_applied_twice(phone: Phone) -> None:
    before = len(phone.bot_messages())
    update_id = phone.say("/help")
    phone.owner.wait_for(lambda _: len(phone.bot_messages()) > before, ANSWER_S, "the help")
    phone.owner.replay(update_id)
    assert phone.ask("/help") == HELP  # after the replayed one, in order
    assert [m["text"] for m in phone.bot_messages()[before:]] == [HELP, HELP]


@pytest.mark.slow
def test_an_update_handled_before_a_crash_is_not_applied_again(own_stack: Stack) -> None:
    # The door dies right after recording an update as handled, before its next getUpdates
    # confirms it: Telegram still holds the update. The restarted door asks with no offset,
    # Telegram delivers it again, and its key (id and content) in chief.db says it was handled:
    # it is not applied (or answered) again; the /quiet it set holds on.
    own_stack.add(own_stack.emulator)
    own_stack.door.env["TELEGRAM_API_BASE"] = f"{own_stack.emulator.url}/bot"
    own_stack.door.start(faults="door.phone_after_handled")
    own_stack.started.append(own_stack.door)  # stopped with the stack, whatever happens
    with Phone(own_stack) as phone:
        phone.say("/quiet 2h")
        assert own_stack.door.wait_exit() == 86
        assert phone.owner.pending_updates() != []  # Telegram was never told
        own_stack.door.start()
        assert phone.ask("/help") == HELP
        texts = [m["text"] for m in phone.bot_messages()]
        assert [t for t in texts if t.startswith("Quiet for")] == [texts[0]]
        assert texts[0].startswith("Quiet for 2h")
        phone.owner.wait_for(lambda o: o.pending_updates() == [], ANSWER_S, "all confirmed")
        phone.notify("todo #9 done: after the restart")  # /quiet outlived the door
        assert phone.rung("todo #9 done: after the restart")["disable_notification"] is True


@pytest.mark.slow
def test_a_stop_while_a_long_poll_is_open_is_prompt(own_stack: Stack) -> None:
    with _started(own_stack) as phone:
        phone.ask("/help")  # the loop is in its next long poll now
    began = time.monotonic()
    assert own_stack.door.terminate() == 0
    took_s = time.monotonic() - began
    assert took_s < POLL_TIMEOUT_S / 2, f"the stop waited {took_s:.1f}s for the poll"
    assert own_stack.door.events("door.stopped")
