"""What the owner and an operator are told of the Telegram setup and of the Bot API's own words,
against the real door (`chief serve`'s app on its Unix socket, its phone polling) and the Bot API
emulator, read the way a person reads them: `coop status` (a real CLI process), the phone's
`/quiet` and `/status` (played through the emulator), and the door's `door.started` line.

- Quiet hours (TELEGRAM_QUIET_HOURS) are named, with whether they hold now, by `/quiet`,
  `/status`, `coop status` and `door.started`.
- A poll conflict (another reader of the bot's updates, or a webhook set for the bot) is in
  `coop status` until it ends; the webhook's names `deleteWebhook`, the Bot API's own fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from structlog.testing import capture_logs

from chief.config import ChiefConfig
from chief.door.config import DoorConfig
from chief.serve import create_app
from chief.telegram.emulator import EmulatorState, create_emulator, parse_fault
from chief.telegram.pairing import PAIRING_FILE_NAME, Pairing, read_pairing, write_pairing
from tests.integration.ops.conftest import KEY, door_on_socket, made_ledger, notify
from tests.support.asgi import serve_asgi_in_thread
from tests.support.phone import EmulatorOwner
from tests.support.procs import coop, socket_client
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

TOKEN = "123456:botapi-token"
OWNER_CHAT = 4242  # a private chat: its id is its user's, the obeyed user


@dataclass
class Door:
    """The door under test (its socket and app) and the emulator it rings."""

    socket_path: str
    app: FastAPI
    emulator: EmulatorState
    emulator_url: str


@contextmanager
def door_on_emulator(
    home: Path, *, prepare: Callable[[EmulatorState], None] | None = None, **settings: str
) -> Iterator[Door]:
    """The door (`create_app`, as `chief serve` builds it) on its socket, ringing the emulator's
    chat 4242 (`TELEGRAM_CHAT_ID` unless `settings` says otherwise; an empty value unsets), with
    `settings` added; `prepare` sets the emulator up before the door starts."""
    emulator_app, emulator = create_emulator(token=TOKEN)
    if prepare is not None:
        prepare(emulator)
    with serve_asgi_in_thread(emulator_app) as emulator_url:
        env = {
            "COOP_HOME": str(home),
            "COOP_SERVICE_KEY_FILE": str(home / "service.key"),
            "CHIEF_OWNER": "owner",
            "CHIEF_METRICS_PORT": "off",
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "TELEGRAM_CHAT_ID": str(OWNER_CHAT),
            "TELEGRAM_API_BASE": emulator_url + "/bot",
        }
        env.update(settings)
        env = {name: value for name, value in env.items() if value}
        config = DoorConfig.from_env(env)
        app = create_app(config, ChiefConfig.from_env(env))
        with door_on_socket(app, home / "door.sock") as path:
            yield Door(path, app, emulator, emulator_url)


def door_status(door: Door) -> dict[str, Any]:
    with socket_client(door.socket_path) as client:
        answer = client.get("/api/coop/engine/status", headers={"X-Coop-Service-Key": KEY})
    assert answer.status_code == 200, answer.text
    status: dict[str, Any] = answer.json()
    return status


def coop_status(home: Path, door: Door, *args: str) -> Any:
    """`coop status` on `home`'s ledger (made first: a read creates none) and `door`'s socket."""
    if not (home / "coop.db").exists():
        made_ledger(home)
    return coop("status", *args, env={"COOP_HOME": str(home), "COOP_DOOR_SOCKET": door.socket_path})


def ask_the_phone(door: Door, text: str) -> str:
    """Send `text` from the owner's chat; the bot's answer in that chat."""
    with EmulatorOwner(door.emulator_url) as owner:
        before = len(owner.messages())
        owner.text(OWNER_CHAT, OWNER_CHAT, text)
        answers = owner.wait_for(
            lambda o: [m for m in o.messages()[before:] if m["chat_id"] == OWNER_CHAT],
            timeout_s=30,
            what=f"the door's answer to {text}",
        )
    return str(answers[0]["text"])


def window_around(now: datetime, *, in_force: bool) -> str:
    """A quiet-hours window (UTC) that holds `now`, or one that starts two hours later."""
    start = now - timedelta(hours=1) if in_force else now + timedelta(hours=2)
    return f"{start:%H:00}-{start + timedelta(hours=3):%H:00}"


@pytest.mark.parametrize("in_force", [True, False], ids=["in-force", "not-now"])
def test_quiet_hours_are_named_by_quiet_status_coop_status_and_door_started(
    home: Path, in_force: bool
) -> None:
    window = window_around(datetime.now(UTC), in_force=in_force)
    now_words = "in force now" if in_force else "not in force now"
    with (
        capture_logs() as logs,
        door_on_emulator(home, TELEGRAM_QUIET_HOURS=window, TELEGRAM_QUIET_TZ="UTC") as door,
    ):
        quiet = ask_the_phone(door, "/quiet")
        status = ask_the_phone(door, "/status")
        quiet_off = ask_the_phone(door, "/quiet off")
        human = coop_status(home, door)
        report = json.loads(coop_status(home, door, "--json").stdout)
    named = f"{window} (UTC)"
    assert named in quiet, quiet
    assert now_words in quiet, quiet
    assert "quiet hours aside" not in quiet + quiet_off
    assert named in quiet_off, quiet_off
    assert now_words in quiet_off.replace("are in force now", "in force now"), quiet_off
    (line,) = [line for line in status.splitlines() if line.startswith("Quiet hours")]
    assert named in line, status
    assert now_words in line, status
    (line,) = [line for line in human.stdout.splitlines() if "quiet hours" in line]
    assert line.startswith(f"telegram quiet hours: {named}, {now_words}"), human.stdout
    assert report["door"]["telegram_quiet_hours"] == {
        "window": window,
        "zone": "UTC",
        "in_force": in_force,
    }
    (started,) = [entry for entry in logs if entry["event"] == "door.started"]
    assert started["quiet_hours"] == window, started
    assert started["quiet_hours_zone"] == "UTC"
    assert started["quiet_hours_in_force"] is in_force


def test_without_quiet_hours_nothing_names_them(home: Path) -> None:
    with capture_logs() as logs, door_on_emulator(home) as door:
        quiet = ask_the_phone(door, "/quiet")
        human = coop_status(home, door)
    assert quiet == "Quiet is off: messages ring as usual."
    assert "quiet hours" not in human.stdout
    (started,) = [entry for entry in logs if entry["event"] == "door.started"]
    assert started["quiet_hours"] == "off"


GROUP_ID = -5020240850
SUPERGROUP_ID = -1005020240850


def chat_texts(door: Door, chat_id: int) -> list[str]:
    return [str(m["text"]) for m in door.emulator.messages if m["chat_id"] == chat_id]


def rung_rows(door: Door, chat_id: int, outbox_ids: list[str]) -> list[str]:
    """Each row text rung in `chat_id`, once per message that carries it (alone or in a
    digest)."""
    return [
        f"row {outbox_id}"
        for text in chat_texts(door, chat_id)
        for outbox_id in outbox_ids
        if f"row {outbox_id}" in text.split("\n")
    ]


@pytest.mark.parametrize("chat_from", ["TELEGRAM_CHAT_ID", "pairing"])
def test_a_group_made_a_supergroup_is_followed_once_told_there_and_loses_nothing(
    home: Path, chat_from: str
) -> None:
    settings = {"TELEGRAM_CHAT_ID": str(GROUP_ID)}
    if chat_from == "pairing":
        settings = {"TELEGRAM_CHAT_ID": ""}
        paired_at = "2026-12-01T17:30:00+00:00"
        pairing = Pairing(GROUP_ID, OWNER_CHAT, None, "Owner", "@coop_bot", paired_at)
        write_pairing(home / PAIRING_FILE_NAME, pairing)
    # A group's messages are paced (3.2 s each past a burst of two): rows queued behind the
    # refused send, and one after the move, in as few messages as decide it.
    first, later = ["1", "2"], ["3"]
    with capture_logs() as logs, door_on_emulator(home, **settings) as door:
        door.emulator.migrate(GROUP_ID)
        for outbox_id in first:
            notify(door.socket_path, outbox_id)
        wait_until_sync(
            lambda: len(rung_rows(door, SUPERGROUP_ID, first)) >= len(first),
            timeout_s=30,
            what="the rows to ring in the supergroup",
        )
        for outbox_id in later:
            notify(door.socket_path, outbox_id)
        wait_until_sync(
            lambda: len(rung_rows(door, SUPERGROUP_ID, first + later)) >= len(first + later),
            timeout_s=30,
            what="the later rows to ring in the supergroup",
        )
        status = door_status(door)
        human = coop_status(home, door, "--check")
    # None lost, none doubled; nothing kept in the old group (Telegram refused every write).
    assert sorted(rung_rows(door, SUPERGROUP_ID, first + later)) == [f"row {n}" for n in "123"]
    assert chat_texts(door, GROUP_ID) == []
    # The owner is told once, on the new chat, before the rows.
    told = [text for text in chat_texts(door, SUPERGROUP_ID) if "became a supergroup" in text]
    assert len(told) == 1, chat_texts(door, SUPERGROUP_ID)
    assert chat_texts(door, SUPERGROUP_ID)[0] == told[0]
    assert str(SUPERGROUP_ID) in told[0]
    moved = [entry for entry in logs if entry["event"] == "telegram.chat_migrated"]
    assert len(moved) == 1, moved
    assert (moved[0]["from_chat"], moved[0]["to_chat"]) == (str(GROUP_ID), str(SUPERGROUP_ID))
    assert status["telegram_queue"]["depth"] == 0
    assert status["telegram_queue"]["refusal"] is None
    assert status["telegram_chat_moved"]["to"] == str(SUPERGROUP_ID)
    (line,) = [line for line in human.stdout.splitlines() if line.startswith("telegram chat")]
    assert f"group {GROUP_ID} became supergroup {SUPERGROUP_ID}" in line, human.stdout
    if chat_from == "pairing":
        # Kept for the next start: the pairing names the supergroup, its user unchanged.
        kept = read_pairing(home / PAIRING_FILE_NAME)
        assert kept is not None
        assert (kept.chat_id, kept.user_id) == (SUPERGROUP_ID, OWNER_CHAT)
        assert "the pairing names it" in line
        assert "needs a person" not in human.stdout
        assert human.returncode == 0, human.stdout
    else:
        # The door cannot rewrite the setting: it says what to set, until it restarts.
        assert f"set TELEGRAM_CHAT_ID={SUPERGROUP_ID}" in line
        problems = [line for line in human.stdout.splitlines() if "needs a person" in line]
        assert len(problems) == 1, human.stdout
        assert f"set TELEGRAM_CHAT_ID={SUPERGROUP_ID}" in problems[0]
        assert human.returncode == 1, human.stdout
        assert f"TELEGRAM_CHAT_ID={SUPERGROUP_ID}" in told[0]


def test_a_move_the_door_cannot_follow_is_a_telegram_refused_line_naming_what_to_set(
    home: Path,
) -> None:
    """The supergroup answers `migrate_to_chat_id` again (Telegram never moves a supergroup):
    the door does not chase it; `coop status` says what to set, and the queue is held."""
    with door_on_emulator(home, TELEGRAM_CHAT_ID=str(GROUP_ID)) as door:
        door.emulator.migrate(GROUP_ID)
        door.emulator.migrated[str(SUPERGROUP_ID)] = -1009999  # as no Bot API answers
        notify(door.socket_path, "1")
        wait_until_sync(lambda: door_status(door)["telegram_queue"]["refusal"], what="the refusal")
        human = coop_status(home, door, "--check")
    (line,) = [line for line in human.stdout.splitlines() if line.startswith("telegram refused")]
    assert "group chat was upgraded to a supergroup chat" in line, line
    assert "(chat_migrated)" in line
    assert "set TELEGRAM_CHAT_ID=-1009999" in line
    assert human.returncode == 1
    assert rung_rows(door, -1009999, ["1"]) == []


@pytest.mark.parametrize("cause", ["webhook", "another reader"])
def test_a_poll_conflict_is_in_coop_status_in_its_own_words_until_it_ends(
    home: Path, cause: str
) -> None:
    def refuse_polls(emulator: EmulatorState) -> None:
        """Before the door starts, so its first poll is refused."""
        if cause == "webhook":
            emulator.webhook_url = "https://example.invalid/hook"
        else:
            emulator.arm(parse_fault({"mode": "conflict", "count": 99, "methods": ["getUpdates"]}))

    with door_on_emulator(home, prepare=refuse_polls) as door:
        wait_until_sync(
            lambda: door_status(door)["telegram_poll_conflict"], timeout_s=30, what="the conflict"
        )
        human = coop_status(home, door, "--check")
        if cause == "webhook":  # the fix its words name; then the conflict ends
            with httpx.Client(trust_env=False, timeout=10) as client:
                assert client.post(f"{door.emulator_url}/bot{TOKEN}/deleteWebhook").json()["ok"]
            # The phone asks again after its 15 s conflict pause; Telegram holds that poll (no
            # update waits): the conflict is over once it has held it a moment.
            wait_until_sync(
                lambda: door_status(door)["telegram_poll_conflict"] is None,
                timeout_s=45,
                what="the conflict to end",
            )
            after = coop_status(home, door, "--check")
            assert "telegram polling" not in after.stdout
            assert after.returncode == 0, after.stdout
    (line,) = [line for line in human.stdout.splitlines() if line.startswith("telegram polling")]
    problems = [line for line in human.stdout.splitlines() if "needs a person" in line]
    assert len(problems) == 1, human.stdout
    assert human.returncode == 1
    if cause == "webhook":
        assert "deleteWebhook" in line, line
        assert "stop the other door" not in line
    else:
        assert "another reader" in line, line
        assert "deleteWebhook" not in line
