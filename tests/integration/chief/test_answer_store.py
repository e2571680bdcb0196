"""The owner's answers in chief.db on a real file (chief.store.answers): one row per answer,
a replayed update finds its row, a double tap records nothing, the ledger's answer is written
once, and the forwarder's view (open answers, pending count) follows the rows."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import pytest

from chief.answer_rules import (
    Answer,
    Button,
    Refused,
    Reply,
    Seen,
    Tap,
    decide_reply,
    decide_tap,
    settled_line,
)
from chief.config import ChiefConfig
from chief.store import ChiefStore
from tests.integration.chief.conftest import query


def key() -> str:
    return "a-" + secrets.token_hex(16)


def tap(update_id: int, token: str = "tok-approve") -> Tap:  # noqa: S107 (a button token)
    text = "request #7: order? (approve / decline)"
    return Tap(update_id, token, f"q{update_id}", 42, 3, text, f"{update_id}:{token}")


ASK7, ASK8, ASK9 = ("q-" + digit * 32 for digit in "789")
BUTTONS = {
    "tok-approve": Button(7, ASK7, "approve", live=True),
    "tok-decline": Button(7, ASK7, "decline", live=True),
    "tok-void": Button(8, ASK8, "yes", live=False, settled="by owner at a terminal: no"),
}


def button_of(_conn: sqlite3.Connection, token: str) -> Button | None:
    return BUTTONS.get(token)


def ask_of(_conn: sqlite3.Connection, chat_id: int, message_id: int) -> tuple[int, str] | None:
    return (9, ASK9) if (chat_id, message_id) == (42, 5) else None


async def test_a_tap_is_recorded_once_and_a_replay_finds_its_row(
    chief_config: ChiefConfig,
) -> None:
    async with ChiefStore.open(chief_config.db_path) as store:
        first = await store.record_tap(tap(10), key(), button_of, decide_tap)
        assert isinstance(first, Answer)
        assert (first.request_id, first.choice, first.state) == (7, "approve", "pending")
        again = await store.record_tap(tap(10), key(), button_of, decide_tap)
        assert again == Seen(first)
        double = await store.record_tap(tap(11, "tok-decline"), key(), button_of, decide_tap)
        assert isinstance(double, Refused)
        assert "already answered here: approve" in double.toast
        assert await store.pending_answers() == 1
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM telegram_answers") == [(1,)]


async def test_a_void_or_unknown_token_records_nothing(chief_config: ChiefConfig) -> None:
    async with ChiefStore.open(chief_config.db_path) as store:
        void = await store.record_tap(tap(20, "tok-void"), key(), button_of, decide_tap)
        unknown = await store.record_tap(tap(21, "tok-gone"), key(), button_of, decide_tap)
    assert isinstance(void, Refused)
    assert "by owner at a terminal: no" in void.toast
    assert isinstance(unknown, Refused)
    assert query(chief_config.db_path, "SELECT COUNT(*) FROM telegram_answers") == [(0,)]


async def test_the_ledgers_answer_is_written_once_and_a_refused_tap_frees_the_request(
    chief_config: ChiefConfig,
) -> None:
    async with ChiefStore.open(chief_config.db_path) as store:
        first = await store.record_tap(tap(30), key(), button_of, decide_tap)
        assert isinstance(first, Answer)
        assert [a.answer_key for a in await store.open_answers(10)] == [first.answer_key]
        refused, edits = await store.settle_answer(
            first.answer_key, "not_a_choice", "no such choice", settled_line
        )
        assert refused is not None
        assert (refused.state, refused.outcome, edits) == ("refused", "not_a_choice", False)
        later, _ = await store.settle_answer(first.answer_key, "closed", "closed", settled_line)
        assert later is not None
        assert later.outcome == "not_a_choice"  # the first answer of the ledger is the record
        assert await store.open_answers(10) == []
        second = await store.record_tap(tap(31, "tok-decline"), key(), button_of, decide_tap)
        assert isinstance(second, Answer)
        assert second.choice == "decline"


async def test_a_reply_to_an_ask_message_is_a_text_answer(chief_config: ChiefConfig) -> None:
    async with ChiefStore.open(chief_config.db_path) as store:
        reply = Reply(40, "the big one", 42, 5, "request #9: which bag?", "40:a")
        text = await store.record_reply(reply, key(), ask_of, decide_reply)
        assert isinstance(text, Answer)
        assert (text.request_id, text.choice, text.text) == (9, None, "the big one")
        assert await store.record_reply(reply, key(), ask_of, decide_reply) == Seen(text)
        elsewhere = Reply(41, "hi", 42, 6, "", "41:a")
        assert await store.record_reply(elsewhere, key(), ask_of, decide_reply) is None


async def test_an_update_id_used_again_by_a_new_update_is_a_new_answer(
    chief_config: ChiefConfig,
) -> None:
    # Telegram's ids start again (at random after a week without updates; a restarted
    # emulator from 1): the same id with other content is another update, not a replay.
    async with ChiefStore.open(chief_config.db_path) as store:
        asked = "request #9: which bag?"
        first = await store.record_reply(
            Reply(40, "the big one", 42, 5, asked, "40:a"), key(), ask_of, decide_reply
        )
        again = await store.record_reply(
            Reply(40, "the small one", 42, 5, asked, "40:b"), key(), ask_of, decide_reply
        )
        assert isinstance(first, Answer)
        assert isinstance(again, Answer)
        assert (again.update_id, again.text) == (40, "the small one")
        assert again.answer_key != first.answer_key


async def test_a_deferred_answer_counts_its_tries_and_stays_open(
    chief_config: ChiefConfig,
) -> None:
    async with ChiefStore.open(chief_config.db_path) as store:
        first = await store.record_tap(tap(50), key(), button_of, decide_tap)
        assert isinstance(first, Answer)
        await store.defer_answer(first.answer_key, 123.5, "the ledger service is not running")
        (open_one,) = await store.open_answers(10)
        assert (open_one.attempts, open_one.next_attempt_at) == (1, 123.5)


def test_an_answer_is_a_choice_or_a_text_never_both(
    chief_config: ChiefConfig, tmp_path: Path
) -> None:
    import anyio

    async def opened() -> None:
        async with ChiefStore.open(chief_config.db_path):
            pass

    anyio.run(opened)
    conn = sqlite3.connect(chief_config.db_path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO telegram_answers (answer_key, update_key, update_id, request_id, "
            "ask_key, choice, text, chat_id, message_id, recorded_at) "
            "VALUES ('a-x', '1:x', 1, 1, 'q-x', 'a', 'b', 1, 1, 'now')"
        )
    conn.close()
