"""The phone's routing (chief/phone/updater.py), one update at a time: who is obeyed, where a tap, a
reply and a command go, which offset each poll sends, how a replay is told from a new update
under a reused id, how strangers are summed up, how failures pause and are logged.

Telegram is a scripted double of the inbound seam and the handlers a recording double (the
answers' part, not this one's); chief.db is a real file. The same loop against the real
emulator and the real door is tests/e2e/door/test_door_phone.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs
from telegram import Update

from chief.errors import TelegramConflict, TelegramRefused, TelegramUnavailable
from chief.phone.commands import Commands
from chief.phone.commands_text import HELP, HELP_FIRST_LINE, QuietOverride
from chief.phone.updater import MAX_UPDATE_ATTEMPTS, Pauses, PhoneLoop
from chief.store import ChiefStore
from chief.telegram.inbound import Buttons

OWNER_ID = 4242
STRANGER_ID = 777
FAST = Pauses(0.01, 0.05, 0.01, 0.01, 0.01, empty_poll_s=0.01)
WAIT_S = 5.0


def _user(user_id: int) -> dict[str, Any]:
    return {"id": user_id, "is_bot": False, "first_name": f"u{user_id}"}


def _message(message_id: int, text: str, *, user: int, chat: int, **extra: Any) -> dict[str, Any]:
    kind = "private" if chat > 0 else "group"
    return {
        "message_id": message_id,
        "date": 1_800_000_000,
        "chat": {"id": chat, "type": kind},
        "from": _user(user),
        "text": text,
    } | extra


def text_update(
    update_id: int, text: str, *, user: int = OWNER_ID, chat: int = OWNER_ID, reply_to: int = 0
) -> Update:
    extra = {}
    if reply_to:
        extra["reply_to_message"] = _message(reply_to, "request #7", user=1, chat=chat)
    message = _message(update_id * 10, text, user=user, chat=chat, **extra)
    return Update.de_json({"update_id": update_id, "message": message}, None)


def tap_update(update_id: int, *, user: int = OWNER_ID, chat: int = OWNER_ID) -> Update:
    query = {
        "id": f"q{update_id}",
        "from": _user(user),
        "chat_instance": "ci",
        "data": "t-token",
        "message": _message(3, "request #7", user=1, chat=chat),
    }
    return Update.de_json({"update_id": update_id, "callback_query": query}, None)


class ScriptedTelegram:
    """The inbound seam's double: each poll answers the next scripted batch (or raises it);
    with none left it waits, as a long poll does, until cancelled."""

    def __init__(self, *batches: Sequence[Update] | Exception) -> None:
        self.batches: list[Sequence[Update] | Exception] = list(batches)
        self.offsets: list[int | None] = []
        self.replies: list[tuple[int, str]] = []
        self.commands: list[tuple[str, str]] = []
        self.polled = anyio.Event()
        self.idle = anyio.Event()
        self.cancelled = anyio.Event()

    async def get_updates(self, offset: int | None, timeout_s: float) -> Sequence[Update]:
        self.offsets.append(offset)
        self.polled.set()
        if self.batches:
            batch = self.batches.pop(0)
            if isinstance(batch, Exception):
                raise batch
            return batch
        self.idle.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")

    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int:
        self.replies.append((chat_id, text))
        return len(self.replies)

    async def answer_callback(self, query_id: str, text: str) -> None:
        raise AssertionError("the phone's routing answers no callback itself")

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        self.commands = list(commands)


class RecordingHandlers:
    """The answers' part, recorded: which update went where."""

    def __init__(self, fail_times: int = 0) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fail_times = fail_times

    async def on_tap(self, update: Update) -> None:
        self._record("tap", update)

    async def on_reply(self, update: Update) -> None:
        self._record("reply", update)

    def _record(self, kind: str, update: Update) -> None:
        self.calls.append((kind, update.update_id))
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError("the ledger is away")


@asynccontextmanager
async def running_loop(
    tmp_path: Path,
    telegram: ScriptedTelegram,
    handlers: RecordingHandlers | None = None,
    **options: Any,
) -> AsyncIterator[tuple[PhoneLoop, ChiefStore, list[int]]]:
    """The owner's phone loop on a real chief.db, polling `telegram`; `options` go to
    `PhoneLoop` (e.g. `on_member_again`, `second`)."""
    strangers: list[int] = []
    async with ChiefStore.open(tmp_path / "chief.db") as store, anyio.create_task_group() as tg:

        async def queue() -> dict[str, Any]:
            return {"depth": 0}

        commands = Commands(
            telegram, engine=None, store=store, quiet=QuietOverride(), telegram_queue=queue
        )
        loop = PhoneLoop(
            telegram,
            store,
            chat_id=OWNER_ID,
            user_id=OWNER_ID,
            commands=commands,
            handlers=handlers,
            on_stranger=lambda: strangers.append(1),
            pauses=FAST,
            **options,
        )
        await tg.start(loop.run)
        try:
            yield loop, store, strangers
        finally:
            loop.stop()
            with anyio.fail_after(WAIT_S):
                await loop.stopped.wait()


async def _idle(telegram: ScriptedTelegram) -> None:
    with anyio.fail_after(WAIT_S):
        await telegram.idle.wait()


async def test_each_update_goes_where_it_belongs_and_the_next_poll_confirms_the_batch(
    tmp_path: Path,
) -> None:
    telegram = ScriptedTelegram(
        [
            tap_update(10),
            text_update(11, "yes, the big bag", reply_to=3),
            text_update(12, "/help"),
            text_update(13, "just chatting"),
            text_update(14, "/nonsense"),
        ]
    )
    handlers = RecordingHandlers()
    async with running_loop(tmp_path, telegram, handlers) as (loop, store, strangers):
        await _idle(telegram)
        assert handlers.calls == [("tap", 10), ("reply", 11)]
        assert telegram.replies == [(OWNER_ID, HELP), (OWNER_ID, HELP_FIRST_LINE)]
        assert (await store.inbox_state()).last_update_id == 14
        assert telegram.offsets == [None, 15]
        assert loop.handled == 5
        assert strangers == []
        assert [name for name, _ in telegram.commands] == [
            "status",
            "todos",
            "requests",
            "quiet",
            "help",
        ]


async def test_strangers_change_nothing_learn_nothing_and_are_summed_up(
    tmp_path: Path,
) -> None:
    telegram = ScriptedTelegram(
        [
            text_update(20, "/status", user=STRANGER_ID, chat=STRANGER_ID),
            tap_update(21, user=STRANGER_ID, chat=OWNER_ID),  # someone else in the owner's chat
            text_update(22, "/quiet 2h", user=OWNER_ID, chat=-100),  # the owner, elsewhere
            text_update(23, "hi", user=STRANGER_ID, chat=STRANGER_ID, reply_to=3),
        ]
    )
    handlers = RecordingHandlers()
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram, handlers) as (_, store, strangers):
            await _idle(telegram)
            assert handlers.calls == []
            assert telegram.replies == []
            assert len(strangers) == 4
            state = await store.inbox_state()
            assert state.last_update_id == 23
            assert state.quiet_until is None
    # The first at once, the rest summed up at the stop (the interval had not passed).
    lines = [entry for entry in logs if entry["event"] == "door.telegram_strangers"]
    assert [(e["strangers"], e["new_strangers"], e["updates"]) for e in lines] == [
        (1, 1, 1),
        (2, 1, 3),
    ]
    assert lines[0]["first_sender_id"] == STRANGER_ID


async def test_a_flood_of_strangers_is_one_line_per_interval_not_one_per_sender(
    tmp_path: Path,
) -> None:
    senders = range(10_000, 10_500)
    batches = [
        [text_update(100 + n, "/start", user=s, chat=s) for n, s in enumerate(senders)][i : i + 100]
        for i in range(0, 500, 100)
    ]
    telegram = ScriptedTelegram(*batches)
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram) as (_, _store, strangers):
            await _idle(telegram)
            assert len(strangers) == 500
            during = [entry for entry in logs if entry["event"].startswith("door.telegram_stra")]
            assert len(during) == 1, f"{len(during)} lines for 500 strangers"
    lines = [entry for entry in logs if entry["event"] == "door.telegram_strangers"]
    assert sum(line["updates"] for line in lines) == 500
    assert sum(line["strangers"] for line in lines) == 500
    assert len(lines) == 2  # the first at once, the other 499 at the stop


async def test_a_restart_sends_no_offset_and_a_redelivered_update_is_not_applied_again(
    tmp_path: Path,
) -> None:
    # The door stopped before its next poll confirmed /help: Telegram delivers it again to the
    # next start, which asks with no offset (no stored floor); its key says it was handled.
    first = ScriptedTelegram([text_update(30, "/help")])
    async with running_loop(tmp_path, first):
        await _idle(first)
    again = ScriptedTelegram([text_update(30, "/help")], [text_update(31, "/help")])
    async with running_loop(tmp_path, again):
        await _idle(again)
    assert first.replies == [(OWNER_ID, HELP)]
    assert again.replies == [(OWNER_ID, HELP)]  # for 31 only
    assert again.offsets == [None, 31, 32]


async def test_a_failing_handler_gets_the_update_again_then_it_is_skipped(tmp_path: Path) -> None:
    update = tap_update(40)
    telegram = ScriptedTelegram(*([[update]] * MAX_UPDATE_ATTEMPTS))
    handlers = RecordingHandlers(fail_times=MAX_UPDATE_ATTEMPTS)
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram, handlers) as (_, store, _strangers):
            await _idle(telegram)
            assert handlers.calls == [("tap", 40)] * MAX_UPDATE_ATTEMPTS
            # each retry asks again from the failed update (nothing past it confirmed)
            assert telegram.offsets == [None] + [40] * (MAX_UPDATE_ATTEMPTS - 1) + [41]
            assert (await store.inbox_state()).last_update_id == 40
    events = [entry["event"] for entry in logs]
    assert events.count("door.phone_update_failed") == MAX_UPDATE_ATTEMPTS - 1
    assert events.count("door.phone_update_skipped") == 1


async def test_an_outage_is_logged_once_and_its_end_once(tmp_path: Path) -> None:
    down = TelegramUnavailable("Telegram refused or could not be reached; retry later")
    conflict = TelegramConflict("another reader polls this bot's updates")
    telegram = ScriptedTelegram(down, down, down, conflict, conflict, [text_update(50, "/help")])
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram):
            await _idle(telegram)
    events = [entry["event"] for entry in logs if entry["event"].startswith("door.phone_")]
    assert events.count("door.phone_unavailable") == 1
    assert events.count("door.phone_conflict") == 1
    assert events.count("door.phone_polling_again") == 1
    assert telegram.replies == [(OWNER_ID, HELP)]


@pytest.mark.parametrize("during", ["poll", "pause"])
async def test_a_stop_ends_the_loop_at_once(tmp_path: Path, during: str) -> None:
    slow = Pauses(refused_s=3600.0)
    refused = TelegramRefused.named("bad_token", "401 Unauthorized", "fix TELEGRAM_BOT_TOKEN")
    telegram = ScriptedTelegram(*([refused] if during == "pause" else []))
    async with ChiefStore.open(tmp_path / "chief.db") as store, anyio.create_task_group() as tg:

        async def queue() -> dict[str, Any]:
            return {}

        commands = Commands(
            telegram, engine=None, store=store, quiet=QuietOverride(), telegram_queue=queue
        )
        loop = PhoneLoop(telegram, store, chat_id=1, user_id=1, commands=commands, pauses=slow)
        await tg.start(loop.run)
        with anyio.fail_after(WAIT_S):
            await telegram.polled.wait()
        loop.stop()
        with anyio.fail_after(1.0):
            await loop.stopped.wait()
    assert telegram.cancelled.is_set() == (during == "poll")


async def test_a_replayed_update_is_never_applied_again(tmp_path: Path) -> None:
    # Telegram (or the emulator's replay) may deliver an update the door already handled: the
    # same id and content; it changes nothing, answers nothing.
    telegram = ScriptedTelegram(
        [tap_update(60), text_update(61, "/help")],
        [tap_update(60), text_update(61, "/help")],
        [text_update(62, "/help")],
    )
    handlers = RecordingHandlers()
    async with running_loop(tmp_path, telegram, handlers) as (_, store, _strangers):
        await _idle(telegram)
        assert handlers.calls == [("tap", 60)]
        assert telegram.replies == [(OWNER_ID, HELP), (OWNER_ID, HELP)]
        assert (await store.inbox_state()).last_update_id == 62
        assert telegram.offsets == [None, 62, 62, 63]


async def test_ids_that_go_back_lose_nothing_and_are_said_once(tmp_path: Path) -> None:
    # Telegram picks a random id after a week without updates; a restarted emulator counts
    # from 1. Every new update is handled in the poll that brings it, whatever its id; an old
    # id with new content is a new update; a replay (same id, same content) is not.
    telegram = ScriptedTelegram(
        [text_update(80, "/help")],
        [],  # a long poll that timed out: nothing to confirm
        [text_update(3, "/nonsense"), tap_update(4)],  # ids started again, lower
        [text_update(4, "/help")],  # id 4 again, another update
        [tap_update(4)],  # the tap replayed
        [text_update(5, "/help")],
    )
    handlers = RecordingHandlers()
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram, handlers) as (loop, store, _):
            await _idle(telegram)
            assert telegram.replies == [
                (OWNER_ID, HELP),
                (OWNER_ID, HELP_FIRST_LINE),
                (OWNER_ID, HELP),
                (OWNER_ID, HELP),
            ]
            assert handlers.calls == [("tap", 4)]
            assert loop.handled == 5
            assert (await store.inbox_state()).last_update_id == 5
    # The poll after a batch confirms it (its highest id + 1) and nothing else: the empty
    # poll's successor sends none, so the lower ids are never confirmed unread.
    assert telegram.offsets == [None, 81, None, 5, 5, 5, 6]
    went_back = [entry for entry in logs if entry["event"] == "door.phone_ids_went_back"]
    assert [(e["previous"], e["update_id"]) for e in went_back] == [(80, 3)]
    assert "still handled" in went_back[0]["meaning"]


async def test_a_failed_poll_drops_its_confirmation_and_loses_nothing(tmp_path: Path) -> None:
    # The poll confirming 90 fails (Telegram restarted, the network dropped): the next poll
    # sends no offset, so ids that started again below 91 are delivered, and the redelivered
    # 90 is known by its key.
    down = TelegramUnavailable("Telegram refused or could not be reached; retry later")
    telegram = ScriptedTelegram(
        [text_update(90, "/help")],
        down,
        [text_update(90, "/help"), text_update(1, "/nonsense")],
    )
    async with running_loop(tmp_path, telegram):
        await _idle(telegram)
        assert telegram.replies == [(OWNER_ID, HELP), (OWNER_ID, HELP_FIRST_LINE)]
    assert telegram.offsets == [None, 91, None, 91]


async def test_commands_that_cannot_be_registered_are_logged_and_the_phone_goes_on(
    tmp_path: Path,
) -> None:
    class Unregistered(ScriptedTelegram):
        async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
            raise TelegramUnavailable("Telegram refused setMyCommands; retry later")

    telegram = Unregistered([text_update(70, "/help")])
    with capture_logs() as logs:
        async with running_loop(tmp_path, telegram):
            await _idle(telegram)
            assert telegram.replies == [(OWNER_ID, HELP)]
    assert [e["event"] for e in logs].count("door.phone_commands_unregistered") == 1
