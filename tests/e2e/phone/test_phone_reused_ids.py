"""Request ids are reused behind one door, and the phone still answers only the question it
asked. Three ways an id comes back, each across real processes (the emulator playing the owner,
the door, `coop serve`): a fresh coop.db, a restore from a backup taken before the request was
filed (the README's steps: stop the ledger service, restore through the backup API, start it),
and a second ledger delivering to the same door. The old asks (#1 with buttons, #2 answered by
a reply) are still live on the phone when the new #1 and #2 are filed. Then:

    (b) a tap on the old #1's button closes nothing: the toast says the question is no longer
        in the ledger, the old message is edited to say so and its buttons go
    (c) a text reply to the old #2 answers nothing (no close, no note)
    (d) the new requests' own button and reply close them, once each
    (a) the new requests' settles edit their own messages only: the old ones never show them
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.phone.conftest import OWNER_ID, WAIT_S, PhoneStack
from tests.support.procs import run_module
from tests.support.stack import Stack

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

OLD_BUTTONS, OLD_REPLY = "order the small bag?", "which vet, old?"
NEW_BUTTONS, NEW_REPLY = "paint the shed?", "which paint?"


def _backup(source: Path, target: Path) -> None:
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _old_asks(phone: PhoneStack, **settings: str) -> None:
    """The old requests #1 (buttons) and #2 (a reply), filed where `settings` say."""
    phone.coop("request", "add", OLD_BUTTONS, "--to", "owner", "--choices", "approve,decline",
               **settings)  # fmt: skip
    phone.coop("request", "add", OLD_REPLY, "--to", "owner", **settings)


def _message(phone: PhoneStack, title: str) -> dict[str, Any]:
    return phone.owner.wait_for(
        lambda o: next((m for m in o.messages() if title in str(m["text"])), None),
        WAIT_S,
        f"the ask of {title!r}",
    )


def _current(phone: PhoneStack, message_id: int) -> dict[str, Any]:
    (found,) = [m for m in phone.owner.messages() if m["message_id"] == message_id]
    return found


def _door_answer(phone: PhoneStack, message_id: int) -> tuple[str, str] | None:
    with closing(sqlite3.connect(phone.stack.chief_db)) as conn:
        row = conn.execute(
            "SELECT state, COALESCE(outcome, '') FROM telegram_answers WHERE message_id = ?"
            " AND state <> 'pending'",
            (message_id,),
        ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def _restart_engine(stack: Stack, between: Callable[[], None]) -> None:
    assert stack.engine.terminate() == 0
    between()
    stack.engine.start()
    stack.engine.wait_event("notifier.daemon.started")


def _reuse(way: str, phone: PhoneStack, folder: Path) -> None:
    """File the old asks so that the next requests the ledger files reuse their ids."""
    coop_db = Path(phone.stack.coop_db)
    if way == "second_ledger":
        other = {"COOP_DB": str(folder / "second" / "coop.db")}
        (folder / "second").mkdir()
        _old_asks(phone, **other)
        env = phone.stack.env(**other)
        drained = run_module("notifier", ["drain"], env=env, inherit=False)
        assert drained.returncode == 0, drained.stderr
        return
    phone.coop("todo", "add", "a ledger with something in it")
    backup = folder / "backup.db"
    _backup(coop_db, backup)
    _old_asks(phone)
    _message(phone, OLD_BUTTONS)
    _message(phone, OLD_REPLY)
    if way == "restore":
        _restart_engine(phone.stack, lambda: _backup(backup, coop_db))
    else:  # a fresh coop.db where the old one was

        def fresh() -> None:
            for suffix in ("", "-wal", "-shm"):
                Path(str(coop_db) + suffix).unlink(missing_ok=True)

        _restart_engine(phone.stack, fresh)


@pytest.mark.parametrize("way", ["fresh_db", "restore", "second_ledger"])
def test_a_reused_request_id_never_takes_the_old_asks_answers(
    own: Callable[..., PhoneStack], tmp_path: Path, way: str
) -> None:
    phone = own()
    _reuse(way, phone, tmp_path)
    old_buttons, old_reply = _message(phone, OLD_BUTTONS), _message(phone, OLD_REPLY)
    assert old_buttons.get("reply_markup")
    new_buttons_id = phone.ask(NEW_BUTTONS)
    new_reply_id = phone.ask(NEW_REPLY, choices=None)
    assert str(old_buttons["text"]).startswith(f"request #{new_buttons_id} ")  # the id reused
    assert str(old_reply["text"]).startswith(f"request #{new_reply_id} ")
    new_buttons, new_reply = _message(phone, NEW_BUTTONS), _message(phone, NEW_REPLY)

    # (b) the old message's live button
    pressed = phone.owner.press(OWNER_ID, OWNER_ID, int(old_buttons["message_id"]), text="approve")
    toast = phone.toast(pressed["callback_query_id"])
    assert "no longer in the ledger" in toast, toast
    phone.owner.wait_for(
        lambda _: not _current(phone, int(old_buttons["message_id"])).get("reply_markup"),
        WAIT_S,
        "the old ask's buttons removed",
    )
    assert "no longer in the ledger" in _current(phone, int(old_buttons["message_id"]))["text"]
    # (c) a reply to the old message
    phone.owner.text(
        OWNER_ID,
        OWNER_ID,
        "the one on the corner",
        reply_to_message_id=int(old_reply["message_id"]),
    )
    assert phone.owner.wait_for(
        lambda _: _door_answer(phone, int(old_reply["message_id"])), WAIT_S, "the old reply"
    ) == ("refused", "not_this_request")
    for request_id in (new_buttons_id, new_reply_id):
        assert phone.request(request_id)["status"] == "open"
        assert phone.events(request_id, "close") == []
        assert phone.events(request_id, "note") == []

    # (d) the new requests' own button and reply, each once
    first = phone.owner.press(OWNER_ID, OWNER_ID, int(new_buttons["message_id"]), text="decline")
    assert "closed with decline" in phone.toast(first["callback_query_id"])
    phone.owner.text(
        OWNER_ID, OWNER_ID, "the blue one", reply_to_message_id=int(new_reply["message_id"])
    )
    assert phone.closed_by_phone(new_buttons_id)["result_summary"] == "decline"
    assert phone.closed_by_phone(new_reply_id)["result_summary"] == "the blue one"
    for message in (new_buttons, new_reply):
        phone.owner.wait_for(
            lambda _, m=message: (
                not _current(phone, int(m["message_id"])).get("reply_markup")
                and _current(phone, int(m["message_id"]))["edits"]
            ),
            WAIT_S,
            "the new ask settled",
        )
    phone.wait_chief_line(new_buttons_id)
    phone.wait_chief_line(new_reply_id)
    # The same tap delivered again changes nothing more: exactly once.
    phone.owner.replay(first["update_id"])
    phone.owner.wait_for(
        lambda o: first["update_id"] not in o.pending_updates(), WAIT_S, "the replay taken"
    )
    assert len(phone.events(new_buttons_id, "close")) == 1
    assert len(phone.events(new_reply_id, "close")) == 1

    # (a) the old messages never show the new requests' outcomes
    for message in (old_buttons, old_reply):
        text = str(_current(phone, int(message["message_id"]))["text"])
        for shown_elsewhere in (NEW_BUTTONS, NEW_REPLY, "closed by owner", "the blue one"):
            assert shown_elsewhere not in text, text
