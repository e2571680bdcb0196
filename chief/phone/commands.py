"""The phone's commands, run: `/status`, `/todos`, `/requests`, `/quiet`, `/help`, `/start`.

The words and the parsing are the pure `chief.phone.commands_text`; this module asks the ledger
service (`chief.phone.engine_link.EngineLink`, bounded at 1.5 s so a command answers within
2 s), the door's own Telegram queue, and chief.db for the /quiet override, then replies in the
owner's chat.

`/requests` rings each open request to the owner that has choices again, with its buttons,
through an `Asker` (the door's asks: `reask(request)`); without one, it lists them like the
rest. A command whose reply cannot be sent is logged; the owner can send it again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from chief.errors import ChiefError, EngineUnavailable, EngineUnreachable
from chief.phone import commands_text as words
from chief.phone.commands_text import QuietOverride
from chief.phone.pacing import QuietHours
from chief.telegram.inbound import TelegramPhone

log = structlog.get_logger("chief.door")


class Asker(Protocol):
    """Rings an open request to the owner again, with its buttons (the door's asks)."""

    async def reask(self, request: dict[str, Any]) -> None: ...


class LedgerSummary(Protocol):
    """The ledger service's summary (`chief.phone.engine_link.EngineLink`)."""

    async def summary(self) -> dict[str, Any]: ...


class QuietStore(Protocol):
    """Where the /quiet override is kept (`chief.store.ChiefStore`)."""

    async def set_quiet_until(self, until: float | None) -> None: ...


class Commands:
    """Runs one command line from the owner and replies in the owner's chat."""

    def __init__(
        self,
        phone: TelegramPhone,
        *,
        engine: LedgerSummary | None,
        store: QuietStore,
        quiet: QuietOverride,
        telegram_queue: Callable[[], Awaitable[Mapping[str, Any]]],
        asks: Asker | None = None,
        clock: Callable[[], float] = time.time,
        quiet_changed: Callable[[], None] = lambda: None,
        urgent_lines: Callable[[], Awaitable[list[str]]] | None = None,
        quiet_hours: QuietHours | None = None,
    ) -> None:
        self.phone = phone
        self.engine = engine
        self.store = store
        self.quiet = quiet
        self.telegram_queue = telegram_queue
        self.asks = asks
        self._clock = clock
        #: told when /quiet changes (the nag task's nudge: reminders held by it may ring now)
        self.quiet_changed = quiet_changed
        #: /status's urgent lines (chief.phone.urgent): what rings or went unacknowledged
        self.urgent_lines = urgent_lines
        #: TELEGRAM_QUIET_HOURS, named by /quiet and /status with whether they hold now
        self.quiet_hours = quiet_hours

    async def run(self, chat_id: int, text: str, *, owner: bool = True) -> None:
        """Answer the command line `text` in `chat_id` (a '/' the door cannot read as a command
        gets the help's first line; text without a '/': nothing). The second person
        (`owner=False`) may run `SECOND_COMMANDS` only; anything else is the owner's."""
        command = words.parse_command(text)
        if command is None and text.lstrip().startswith("/"):
            command = words.Command("", text.strip())  # no command of ours: the help's line
        if command is None:
            return
        if owner or command.name in words.SECOND_COMMANDS:
            answer = await self.answer(command)
        else:
            answer = words.OWNERS_ONLY
        if answer:
            await self.phone.reply(chat_id, answer)
        log.info("door.phone_command", command=command.name, owner=owner)

    async def answer(self, command: words.Command) -> str:
        """The reply to `command` ("" when the command replied on its own)."""
        handlers = {
            "status": self._status,
            "todos": self._todos,
            "requests": self._requests,
            "help": self._help,
            "start": self._start,
        }
        if command.name == "quiet":
            return await self._quiet(command.argument)
        handler = handlers.get(command.name)
        if handler is None:
            return words.HELP_FIRST_LINE
        return await handler()

    async def _help(self) -> str:
        return words.HELP

    async def _start(self) -> str:
        return words.ALREADY_PAIRED

    async def _status(self) -> str:
        summary = await self._summary()
        queue = await self._queue()
        text = words.status_text(
            summary,
            queue,
            quiet_until=self.quiet.until,
            now=self._clock(),
            quiet_hours=self.quiet_hours,
        )
        urgent = [] if self.urgent_lines is None else await self.urgent_lines()
        return "\n".join([text, *urgent])

    async def _todos(self) -> str:
        summary = await self._summary()
        if isinstance(summary, str):
            return summary
        return words.item_list("todo", summary.get("todos") or {})

    async def _requests(self) -> str:
        summary = await self._summary()
        if isinstance(summary, str):
            return summary
        section = summary.get("requests") or {}
        asked = await self._reask(summary.get("owner"), section.get("items") or [])
        return words.item_list("request", section, skip=asked)

    async def _reask(self, owner: object, items: list[dict[str, Any]]) -> list[int]:
        """Ring again each open request to the owner with choices; the ids that rang."""
        if self.asks is None:
            return []
        asked = []
        for item in items[: words.MAX_LISTED]:
            # A request with no ask key was never asked on the phone: nothing to ring again.
            if item.get("addressed_to") != owner or not item.get("choices"):
                continue
            if not item.get("ask_key"):
                continue
            try:
                await self.asks.reask(item)
            except ChiefError as exc:
                log.warning("door.phone_reask_failed", request_id=item.get("id"), error=str(exc))
                continue
            asked.append(int(item["id"]))
        return asked

    async def _quiet(self, argument: str) -> str:
        ask = words.parse_quiet(argument)
        if ask.refusal is not None:
            return ask.refusal
        now = self._clock()
        if ask.show:
            return words.quiet_state(self.quiet.until, now, self.quiet_hours)
        until = None if ask.off else now + (ask.for_s or 0)
        try:
            await self.store.set_quiet_until(until)
        except ChiefError as exc:
            log.error("door.phone_quiet_failed", error=str(exc))
            return "I could not save that (chief.db failed); try again."
        self.quiet.until = until
        self.quiet_changed()
        log.info("door.quiet", until=until)
        if ask.off:
            return words.quiet_off(now, self.quiet_hours)
        return words.quiet_set(ask.for_s or 0)

    async def _summary(self) -> dict[str, Any] | str:
        """The ledger's summary, or the line that says why there is none."""
        if self.engine is None:
            return words.NOT_RUNNING
        try:
            return await self.engine.summary()
        except EngineUnreachable as exc:
            return words.NOT_ANSWERING if exc.timed_out else words.NOT_RUNNING
        except EngineUnavailable as exc:
            log.warning("door.phone_engine_failed", error=str(exc))
            return "The ledger service could not answer now; try again in a minute."

    async def _queue(self) -> Mapping[str, Any]:
        try:
            return await self.telegram_queue()
        except ChiefError as exc:
            return {"depth": 0, "last_error": f"chief.db could not be read: {exc}"}
