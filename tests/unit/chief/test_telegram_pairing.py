"""The pairing file (0600, replaced atomically, a broken one named in one line) and who the door
rings and obeys: the pairing gives the chat and the user, TELEGRAM_CHAT_ID wins for the chat,
and a token with neither starts a door that rings nothing and says to pair."""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path

import pytest

from chief.door.config import DoorConfig
from chief.errors import ChiefConfigError, DoorError
from chief.telegram.pair import Countdown, new_code
from chief.telegram.pairing import (
    PAIRING_FILE_NAME,
    Pairing,
    read_pairing,
    remove_pairing,
    write_pairing,
)
from tests.support.door import door_env, write_key

TOKEN = "123456:pairing-token"
PAIRED = Pairing(
    chat_id=4242,
    user_id=4242,
    username="owner",
    first_name="Owner",
    bot="@coop_emulator_bot",
    paired_at="2026-12-01T17:30:00+00:00",
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    write_key(tmp_path)
    return tmp_path


def config(home: Path, **settings: str) -> DoorConfig:
    return DoorConfig.from_env(door_env(home, **settings))


def test_a_pairing_is_written_0600_atomically_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "folder" / PAIRING_FILE_NAME
    assert read_pairing(path) is None
    write_pairing(path, PAIRED)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_pairing(path) == PAIRED
    assert json.loads(path.read_text())["chat_id"] == 4242
    other = Pairing(-1, 7, None, None, "@b", "2026-12-02T00:00:00+00:00")
    write_pairing(path, other)
    assert read_pairing(path) == other
    assert sorted(p.name for p in path.parent.iterdir()) == [PAIRING_FILE_NAME]  # no temp left
    assert PAIRED.who() == "Owner (@owner, user 4242) in chat 4242"


def test_remove_says_whether_there_was_a_pairing(tmp_path: Path) -> None:
    path = tmp_path / PAIRING_FILE_NAME
    assert remove_pairing(path) is False
    write_pairing(path, PAIRED)
    assert remove_pairing(path) is True
    assert not path.exists()
    path.write_text("{broken")
    assert remove_pairing(path) is True  # a broken file goes too


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{broken", "is not JSON"),
        ("[]", "not a JSON object"),
        (json.dumps({"chat_id": "4242"}), "chat_id must be an integer"),
        (json.dumps({"chat_id": 1, "user_id": True}), "user_id must be an integer"),
        (json.dumps({"chat_id": 1, "user_id": 0}), "user_id must be positive"),
        (json.dumps({"chat_id": 1, "user_id": 1, "username": 3}), "username must be text"),
        (json.dumps({"chat_id": 1, "user_id": 1}), "bot must be text"),
        ("x" * 70_000, "is over 65536 bytes"),
    ],
)
def test_a_broken_pairing_file_is_one_line_naming_it(
    tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / PAIRING_FILE_NAME
    path.write_text(content)
    with pytest.raises(ChiefConfigError) as caught:
        read_pairing(path)
    words = str(caught.value)
    assert str(path) in words
    assert why in words
    assert "chief telegram pair" in words
    assert "\n" not in words


def test_a_token_without_a_chat_or_a_pairing_starts_unpaired(home: Path) -> None:
    door = config(home, TELEGRAM_BOT_TOKEN=TOKEN)
    assert not door.telegram_configured
    assert (door.telegram_chat_id, door.telegram_user_id) == (None, None)
    assert door.telegram_chat_from is None
    assert door.pairing_file == home / PAIRING_FILE_NAME
    assert door.telegram_next_step is not None
    assert "chief telegram pair" in door.telegram_next_step


def test_the_pairing_gives_the_chat_and_the_obeyed_user(home: Path) -> None:
    write_pairing(home / PAIRING_FILE_NAME, Pairing(4242, 99, None, None, "@b", "t"))
    door = config(home, TELEGRAM_BOT_TOKEN=TOKEN)
    assert door.telegram_configured
    assert (door.telegram_chat_id, door.telegram_user_id) == ("4242", 99)
    assert door.telegram_chat_from == "pairing"
    assert door.telegram_next_step is None
    assert not door.telegram_chat_overrides_pairing


@pytest.mark.parametrize(
    ("chat_setting", "user_id", "overrides"),
    [
        ("4242", 99, False),  # the pairing's chat: the pairing's user
        ("5151", 5151, True),  # another private chat: its id is its user's
        ("-100200", None, True),  # a group: nobody is obeyed (inbound off)
        ("@coop_channel", None, True),
    ],
)
def test_telegram_chat_id_wins_over_the_pairing(
    home: Path, chat_setting: str, user_id: int | None, overrides: bool
) -> None:
    write_pairing(home / PAIRING_FILE_NAME, Pairing(4242, 99, None, None, "@b", "t"))
    door = config(home, TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_CHAT_ID=chat_setting)
    assert (door.telegram_chat_id, door.telegram_user_id) == (chat_setting, user_id)
    assert door.telegram_chat_overrides_pairing is overrides
    assert door.telegram_chat_from == "TELEGRAM_CHAT_ID"


@pytest.mark.parametrize(("chat_setting", "user_id"), [("4242", 4242), ("-5", None)])
def test_telegram_chat_id_alone_obeys_a_private_chat_s_user(
    home: Path, chat_setting: str, user_id: int | None
) -> None:
    door = config(home, TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_CHAT_ID=chat_setting)
    assert (door.telegram_chat_id, door.telegram_user_id) == (chat_setting, user_id)
    assert door.telegram_pairing is None
    assert door.telegram_chat_from == "TELEGRAM_CHAT_ID"


def test_a_broken_pairing_stops_the_door_naming_the_file(home: Path) -> None:
    (home / PAIRING_FILE_NAME).write_text("{broken")
    with pytest.raises(DoorError, match=PAIRING_FILE_NAME):
        config(home, TELEGRAM_BOT_TOKEN=TOKEN)
    assert not config(home).telegram_configured  # no token: the pairing is not read at all


def test_a_chat_without_a_token_is_still_refused(home: Path) -> None:
    with pytest.raises(DoorError, match="TELEGRAM_BOT_TOKEN is not"):
        config(home, TELEGRAM_CHAT_ID="4242")


class _Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_the_countdown_is_a_line_per_minute_off_a_terminal_and_one_line_on_it() -> None:
    piped = _Stream(terminal=False)
    countdown = Countdown(piped, "pair")
    assert countdown.tick(600.0) == pytest.approx(60.0)  # until 9 minutes are left
    assert countdown.tick(599.0) == pytest.approx(59.0)  # the same minute: no new line
    countdown.tick(540.0)
    countdown.tick(42.0)
    countdown.finish()
    assert piped.getvalue().splitlines() == [
        "pair: waiting, 10 minutes left",
        "pair: waiting, 9 minutes left",
        "pair: waiting, 42 s left",
    ]
    terminal = _Stream(terminal=True)
    countdown = Countdown(terminal, "pair")
    assert countdown.tick(125.0) == 1.0
    countdown.tick(124.2)
    countdown.finish()
    assert terminal.getvalue() == "\rpair: waiting, 2:05 left \rpair: waiting, 2:05 left \n"


def test_a_one_time_code_is_eight_base32_characters_and_differs_each_time() -> None:
    codes = {new_code() for _ in range(50)}
    assert len(codes) == 50
    assert all(re.fullmatch(r"[A-Z2-7]{8}", code) for code in codes)
