"""`chief telegram pair` and `unpair` as real processes against the Bot API emulator on a real
loopback port, the owner (and a stranger) played through `/emulator/owner/text`: the right code
pairs (a 0600 file with the chat and the user, the answer in the chat, the `/start` confirmed so
the door never reads it); a wrong code, a stranger's `/start` without the code and a group's
`/start` pair nothing and are told so; the wait times out in one line; a bad token is one line
without the token; a running door refuses pairing; Ctrl-C is one line and exit 130; unpair
removes the file and says so. The second person (`--second`, issue 35) pairs the same way into
a file of their own: a stranger without the code and the owner's own account pair nothing, the
owner's pairing is left as it is, and `unpair --second` removes only theirs."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from chief.telegram.emulator import BOT_USER, create_emulator
from tests.support.asgi import serve_asgi_in_thread
from tests.support.door import BOT_TOKEN, write_key
from tests.support.phone import EmulatorOwner
from tests.support.procs import Service, clean_env
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

OWNER_ID = 4242
STRANGER_ID = 777
GROUP_ID = -100300
PAIRING = "telegram-pairing.json"
SECOND_PAIRING = "telegram-pairing-second.json"
SECOND_ID = 5151
EXIT_TIMEOUT_S = 30.0


@dataclass
class PairProcess:
    """`python -m chief telegram pair ...`, its stdout and stderr read as they come."""

    popen: subprocess.Popen[str]
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        for stream, lines in ((self.popen.stdout, self.out), (self.popen.stderr, self.err)):
            reader = threading.Thread(target=_read, args=(stream, lines), daemon=True)
            reader.start()
            self.readers.append(reader)

    def code(self) -> str:
        """The one-time code, once the process has printed it."""
        found = wait_until_sync(
            lambda: re.search(r"/start (\S+)", "".join(self.out)), timeout_s=20, what="the code"
        )
        return found[1]

    def finish(self) -> int:
        """The exit status, once the process ended and its output was read to the end."""
        code = self.popen.wait(EXIT_TIMEOUT_S)
        for reader in self.readers:
            reader.join(EXIT_TIMEOUT_S)
        return code

    def close(self) -> None:
        """Kill it if a test left it running, and close its pipes."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.finish()
        for stream in (self.popen.stdout, self.popen.stderr):
            if stream is not None:
                stream.close()

    def stdout(self) -> str:
        return "".join(self.out)

    def stderr(self) -> str:
        return "".join(self.err)


def _read(stream: object, lines: list[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line)


@dataclass
class Setup:
    home: Path
    url: str
    owner: EmulatorOwner
    processes: list[PairProcess] = field(default_factory=list)

    def env(self, **settings: str) -> dict[str, str]:
        return (
            clean_env(
                self.home,
                TELEGRAM_BOT_TOKEN=BOT_TOKEN,
                TELEGRAM_API_BASE=self.url + "/bot",
                TELEGRAM_TIMEOUT_S="5",
            )
            | settings
        )

    def pair(self, *args: str, env: dict[str, str] | None = None) -> PairProcess:
        popen = subprocess.Popen(
            [sys.executable, "-m", "chief", "telegram", "pair", *args],
            env=self.env() if env is None else env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.processes.append(PairProcess(popen))
        return self.processes[-1]

    def unpair(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "chief", "telegram", "unpair", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=EXIT_TIMEOUT_S,
            check=False,
        )

    def told(self, chat_id: int) -> list[str]:
        return [m["text"] for m in self.owner.messages() if m["chat_id"] == chat_id]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    app, _ = create_emulator(token=BOT_TOKEN)
    with serve_asgi_in_thread(app) as url, EmulatorOwner(url) as owner:
        found = Setup(tmp_path, url, owner)
        try:
            yield found
        finally:
            for process in found.processes:
                process.close()


def test_the_right_code_pairs_the_chat_and_the_user(setup: Setup) -> None:
    pairing = setup.pair("--timeout", "60")
    code = pairing.code()
    assert f"@{BOT_USER['username']}" in pairing.stdout()
    sent = setup.owner.text(
        OWNER_ID, OWNER_ID, f"/start {code.lower()}", username="owner", first_name="Owner"
    )
    assert pairing.finish() == 0, pairing.stderr()
    path = setup.home / PAIRING
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert (saved["chat_id"], saved["user_id"], saved["username"]) == (OWNER_ID, OWNER_ID, "owner")
    assert saved["first_name"] == "Owner"
    assert saved["bot"] == f"@{BOT_USER['username']}"
    assert "paired with Owner (@owner, user 4242) in chat 4242" in pairing.stdout()
    assert any(text.startswith("Paired") for text in setup.told(OWNER_ID))
    # the /start was confirmed: the door, the next reader, never sees it
    assert sent["update_id"] not in setup.owner.pending_updates()
    assert BOT_TOKEN not in pairing.stdout() + pairing.stderr()

    removed = setup.unpair()
    assert removed.returncode == 0, removed.stderr
    assert "removed the pairing with Owner (@owner, user 4242)" in removed.stdout
    assert not path.exists()
    again = setup.unpair()
    assert again.returncode == 0
    assert "nothing was paired" in again.stdout


def test_the_second_person_pairs_by_the_code_from_their_own_account_only(setup: Setup) -> None:
    owner = setup.pair("--timeout", "60")
    setup.owner.text(OWNER_ID, OWNER_ID, f"/start {owner.code()}")
    assert owner.finish() == 0, owner.stderr()
    owners = (setup.home / PAIRING).read_bytes()

    pairing = setup.pair("--second", "--timeout", "60")
    code = pairing.code()
    setup.owner.text(STRANGER_ID, STRANGER_ID, "/start WRONG123")  # a stranger, no code
    setup.owner.text(OWNER_ID, OWNER_ID, f"/start {code}")  # the owner's own account
    setup.owner.wait_for(lambda _: len(setup.told(OWNER_ID)) >= 2, 20, "the owner told")
    assert not (setup.home / SECOND_PAIRING).exists()
    setup.owner.text(SECOND_ID, SECOND_ID, f"/start {code}", first_name="Sam")
    assert pairing.finish() == 0, pairing.stderr()
    path = setup.home / SECOND_PAIRING
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert (saved["chat_id"], saved["user_id"], saved["first_name"]) == (
        SECOND_ID,
        SECOND_ID,
        "Sam",
    )
    assert (setup.home / PAIRING).read_bytes() == owners  # the owner's is left as it is
    assert setup.told(STRANGER_ID) == ["That code is wrong: nothing is paired."]
    assert "the owner's own account" in setup.told(OWNER_ID)[-1]
    assert setup.told(SECOND_ID)[-1].startswith("Paired with Coop as the second person")
    assert "urgent report nobody acknowledges in time" in pairing.stdout()

    removed = setup.unpair("--second")
    assert removed.returncode == 0, removed.stderr
    assert "removed the second person's pairing with Sam (user 5151)" in removed.stdout
    assert not path.exists()
    assert (setup.home / PAIRING).read_bytes() == owners


def test_a_wrong_code_a_stranger_and_a_group_pair_nothing_and_the_wait_times_out(
    setup: Setup,
) -> None:
    pairing = setup.pair("--timeout", "3")
    code = pairing.code()
    setup.owner.text(OWNER_ID, OWNER_ID, "/start WRONG123")
    setup.owner.text(STRANGER_ID, STRANGER_ID, "/start")
    setup.owner.text(GROUP_ID, OWNER_ID, f"/start {code}")  # the right code, not in private
    setup.owner.text(OWNER_ID, OWNER_ID, "hello")  # not a /start: passed over
    assert pairing.finish() == 1
    assert not (setup.home / PAIRING).exists()
    assert setup.told(OWNER_ID) == ["That code is wrong: nothing is paired."]
    (stranger,) = setup.told(STRANGER_ID)
    assert "Nothing is paired" in stranger
    (group,) = setup.told(GROUP_ID)
    assert "private chat" in group
    errors = [line for line in pairing.err if "waiting" not in line]
    assert len(errors) == 1, pairing.stderr()
    assert "no /start with the code came within 3 s; nothing paired" in errors[0]
    assert "waiting, 3 s left" in pairing.stderr()  # the countdown, a line per minute
    assert setup.owner.pending_updates() == []  # all read, all confirmed


def test_telegram_chat_id_still_wins_and_pair_says_so(setup: Setup) -> None:
    pairing = setup.pair("--timeout", "60", env=setup.env(TELEGRAM_CHAT_ID="-100999"))
    code = pairing.code()
    assert "TELEGRAM_CHAT_ID=-100999 is set, and it wins" in pairing.stdout()
    setup.owner.text(OWNER_ID, OWNER_ID, f"/start {code}")
    assert pairing.finish() == 0, pairing.stderr()
    assert (setup.home / PAIRING).exists()


def test_a_bad_token_is_one_line_without_the_token(setup: Setup) -> None:
    wrong = "999999:not-the-bot-s-token"
    pairing = setup.pair(env=setup.env(TELEGRAM_BOT_TOKEN=wrong))
    assert pairing.finish() == 1
    assert len(pairing.err) == 1, pairing.stderr()
    assert "Telegram knows no bot by this token" in pairing.stderr()
    assert wrong not in pairing.stdout() + pairing.stderr()
    assert not (setup.home / PAIRING).exists()


def test_no_token_is_one_line(setup: Setup) -> None:
    env = {k: v for k, v in setup.env().items() if k != "TELEGRAM_BOT_TOKEN"}
    pairing = setup.pair(env=env)
    assert pairing.finish() == 2
    assert len(pairing.err) == 1
    assert "TELEGRAM_BOT_TOKEN is not set" in pairing.stderr()


def test_pairing_is_refused_while_the_door_runs(setup: Setup) -> None:
    write_key(setup.home)
    door = Service(
        "door",
        ["chief", "serve"],
        setup.home,
        "door.listening",
        setup.env(CHIEF_OWNER="owner", CHIEF_METRICS_PORT="off"),
        takes_port=False,  # on its socket in the data folder
    )
    door.start()
    try:
        pairing = setup.pair()
        assert pairing.finish() == 1
        assert len(pairing.err) == 1, pairing.stderr()
        words = pairing.stderr()
        assert "the door (`chief serve`, pid" in words
        assert "Stop the door, run `chief telegram pair`, then start the door" in words
    finally:
        assert door.terminate() == 0
    assert "chief telegram pair" in door.log()  # the door said pairing is the next step


def test_ctrl_c_is_one_line_exit_130_and_nothing_paired(setup: Setup) -> None:
    pairing = setup.pair("--timeout", "60")
    pairing.code()
    os.kill(pairing.popen.pid, signal.SIGINT)
    assert pairing.finish() == 130
    errors = [line for line in pairing.err if "waiting" not in line]
    assert errors == ["chief telegram pair: interrupted; nothing paired\n"]
    assert not (setup.home / PAIRING).exists()


def test_a_door_started_while_pairing_waits_refuses_naming_the_pairing(setup: Setup) -> None:
    write_key(setup.home)
    pairing = setup.pair("--timeout", "60")
    pairing.code()  # it holds the serve lock while it waits
    door = Service(
        "door",
        ["chief", "serve"],
        setup.home,
        "door.listening",
        setup.env(CHIEF_OWNER="owner", CHIEF_METRICS_PORT="off"),
        takes_port=False,  # on its socket in the data folder
    )
    door.start(wait=False)
    assert door.popen is not None
    assert door.popen.wait(EXIT_TIMEOUT_S) == 1
    assert "`chief telegram pair` (pid" in door.log()
    os.kill(pairing.popen.pid, signal.SIGINT)
    assert pairing.finish() == 130


def arm(setup: Setup, fault: dict[str, object]) -> None:
    import httpx

    armed = httpx.post(setup.url + "/emulator/faults", json=fault, timeout=10, trust_env=False)
    assert armed.status_code == 200, armed.text


def test_a_failed_poll_is_tried_again_until_the_deadline(setup: Setup) -> None:
    arm(setup, {"mode": "5xx", "count": 2, "status": 502, "methods": ["getUpdates"]})
    pairing = setup.pair("--timeout", "60")  # its first two polls fail
    code = pairing.code()
    setup.owner.text(OWNER_ID, OWNER_ID, f"/start {code}")
    assert pairing.finish() == 0, pairing.stderr()
    assert (setup.home / PAIRING).exists()

    arm(setup, {"mode": "5xx", "count": 1000, "status": 502, "methods": ["getUpdates"]})
    again = setup.pair("--timeout", "3")  # every poll fails
    assert again.finish() == 1
    errors = [line for line in again.err if "waiting" not in line]
    assert len(errors) == 1, again.stderr()
    assert "(the last poll failed: " in errors[0]
    assert "nothing paired" in errors[0]


def test_a_get_me_the_pairing_cannot_read_is_one_line(setup: Setup) -> None:
    # An independent Bot API emulator answers getMe without `is_bot` (issue 26).
    armed = httpx.post(
        setup.url + "/emulator/replies",
        json={"shape": "no_is_bot", "methods": ["getMe"], "count": 10},
        timeout=EXIT_TIMEOUT_S,
    )
    assert armed.status_code == 200, armed.text
    pairing = setup.pair()
    assert pairing.finish() == 1
    assert len(pairing.err) == 1, pairing.stderr()
    assert "cannot read" in pairing.stderr()
    assert BOT_TOKEN not in pairing.stdout() + pairing.stderr()
