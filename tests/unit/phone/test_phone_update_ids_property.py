"""A property over Telegram's update ids (issue 26, "close the class"): whatever ids Telegram
gives (counting on, starting again lower at random, repeating an id with new content), however
it delivers them again (the last update replayed, a batch redelivered after a poll whose
confirmation was lost), the phone handles every new update exactly once and never a replay.

Telegram is a model of getUpdates as the Bot API states it: an offset confirms (forgets) every
update below it, delivered or not; without one, the earliest unconfirmed updates come, at most
`LIMIT` per poll. Its ids go back only when nothing waits (Telegram picks a random id after a
week without updates; the emulator counts from 1 on a restart, with its queue gone), so the
updates waiting are in id order, as Telegram's queue is. A failed poll may or may not have
reached Telegram (its confirmation made or not). A replay delivers the last update again when
nothing else waits (the emulator's `/emulator/owner/replay`, as the e2e tests use it). The
phone loop is the real one over a real chief.db; the handlers record which update (by its
message id, unique per new update) they were given.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telegram import Update

from chief.errors import TelegramUnavailable
from chief.phone.commands import Commands
from chief.phone.commands_text import QuietOverride
from chief.phone.updater import Pauses, PhoneLoop
from chief.store import ChiefStore
from chief.telegram.inbound import Buttons

OWNER_ID = 4242
LIMIT = 3  # Telegram's is 100; a small one makes partial batches common
FAST = Pauses(0.001, 0.001, 0.001, 0.001, 0.001, empty_poll_s=0.001)
WAIT_S = 10.0

# One poll's worth of events: ("new", jump_to or None) | ("replay", None) | ("fail", confirmed)
Event = tuple[str, int | None]
events = st.one_of(
    st.tuples(st.just("new"), st.none() | st.integers(1, 60)),
    st.tuples(st.just("replay"), st.none()),
    st.tuples(st.just("fail"), st.integers(0, 1)),
)
polls = st.lists(st.lists(events, max_size=5), min_size=1, max_size=12)


def _reply(update_id: int, serial: int) -> Update:
    chat = {"id": OWNER_ID, "type": "private"}
    owner = {"id": OWNER_ID, "is_bot": False, "first_name": "owner"}
    replied = {"message_id": 3, "date": 1, "chat": chat, "text": "request #7"}
    message = {
        "message_id": 1000 + serial,
        "date": 1_800_000_000,
        "chat": chat,
        "from": owner,
        "text": f"answer {serial}",
        "reply_to_message": replied,
    }
    return Update.de_json({"update_id": update_id, "message": message}, None)


@dataclass
class ModelTelegram:
    """getUpdates as documented, fed one poll's events at a time (see the module docstring)."""

    script: list[list[Event]]
    pending: list[Update] = field(default_factory=list)
    made: list[Update] = field(default_factory=list)
    next_id: int = 1
    idle: anyio.Event = field(default_factory=anyio.Event)

    async def get_updates(self, offset: int | None, timeout_s: float) -> Sequence[Update]:
        """The offset confirms first (unless the poll failed before reaching Telegram); what
        arrives during the poll comes with it; a failed poll answers nothing."""
        events = self.script.pop(0) if self.script else []
        failed = [value for kind, value in events if kind == "fail"]
        if not failed or failed[0]:
            self._confirm(offset)
        for kind, value in events:
            if kind != "fail":
                self._arrive(kind, value)
        if failed:
            raise TelegramUnavailable("Telegram could not be reached; retry later")
        if not self.pending and not self.script:
            self.idle.set()
            await anyio.sleep_forever()
        return self.pending[:LIMIT]

    def _confirm(self, offset: int | None) -> None:
        if offset is not None and offset > 0:
            self.pending = [u for u in self.pending if u.update_id >= offset]

    def _arrive(self, kind: str, value: int | None) -> None:
        if kind == "replay":
            if self.made and not self.pending:
                self.pending.append(self.made[-1])
            return
        if value is not None and not self.pending:  # ids start again only when none wait
            self.next_id = value
        update = _reply(self.next_id, len(self.made))
        self.next_id += 1
        self.made.append(update)
        self.pending.append(update)

    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int:
        return 0

    async def answer_callback(self, query_id: str, text: str) -> None:
        return None

    async def set_commands(self, commands: Sequence[tuple[str, str]]) -> None:
        return None


@dataclass
class Handled:
    """The handlers: which new update (by its message id) each reply was."""

    serials: list[int] = field(default_factory=list)

    async def on_tap(self, update: Update) -> None:
        raise AssertionError("no taps here")

    async def on_reply(self, update: Update) -> None:
        assert update.message is not None
        self.serials.append(update.message.message_id - 1000)


async def _run(script: list[list[Event]], folder: Path) -> tuple[ModelTelegram, Handled]:
    telegram, handled = ModelTelegram([list(poll) for poll in script]), Handled()
    async with ChiefStore.open(folder / "chief.db") as store, anyio.create_task_group() as tg:

        async def queue() -> dict[str, Any]:
            return {}

        commands = Commands(
            telegram, engine=None, store=store, quiet=QuietOverride(), telegram_queue=queue
        )
        loop = PhoneLoop(
            telegram,
            store,
            chat_id=OWNER_ID,
            user_id=OWNER_ID,
            commands=commands,
            handlers=handled,
            pauses=FAST,
        )
        await tg.start(loop.run)
        with anyio.fail_after(WAIT_S):
            await telegram.idle.wait()  # the script played, nothing left unconfirmed
        loop.stop()
    return telegram, handled


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(script=polls)
def test_every_new_update_is_handled_once_whatever_its_id(script: list[list[Event]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        telegram, handled = anyio.run(_run, script, Path(folder))
    assert sorted(handled.serials) == list(range(len(telegram.made))), (
        [(u.update_id, n) for n, u in enumerate(telegram.made)],
        handled.serials,
    )
