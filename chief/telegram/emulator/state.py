"""What the emulator remembers: the chats' messages (the bot's and the owner's, numbered per
chat), the update queue, the callback queries and their answers, the bot's commands, the calls
counted, the armed faults and the flood control. Readable from in-process tests."""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from chief.telegram.emulator.replies import ReplyShapes
from chief.telegram.emulator.shapes import Refusal
from chief.telegram.emulator.updates import UpdateQueue
from plumbing.files import private_file

MAX_FAULT_DELAY_S = 300.0
MAX_FAULT_COUNT = 10_000
# Telegram's permanent refusals, with the status and description the Bot API answers.
REFUSALS = {
    "unauthorized": (401, "Unauthorized"),  # a token Telegram knows no bot by
    "chat_not_found": (400, "Bad Request: chat not found"),
    "bot_blocked": (403, "Forbidden: bot was blocked by the user"),
    # another reader of the bot's updates (a getUpdates fault; the Bot API's words)
    "conflict": (
        409,
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
        "is running",
    ),
}
# The Bot API's answer to a call that writes to a group upgraded to a supergroup (its
# `parameters.migrate_to_chat_id` names the supergroup), and to getUpdates while a webhook is
# set: tdlib/telegram-bot-api's Client.cpp, word for word.
MIGRATED = "Bad Request: group chat was upgraded to a supergroup chat"
WEBHOOK_CONFLICT = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)
FAULT_MODES = frozenset({"429", "5xx", "delay", *REFUSALS})
# --flood-limits: Telegram's documented limits.
PER_CHAT_BURST = 3.0
PER_PRIVATE_CHAT_PER_S = 1.0
PER_GROUP_PER_S = 20.0 / 60.0
PER_BOT_BURST = 30.0
PER_BOT_PER_S = 30.0


@dataclass
class Fault:
    """One armed fault: applies to the next `remaining` calls of `methods`."""

    mode: str
    remaining: int
    methods: frozenset[str]
    retry_after_s: int = 1
    status: int = 500
    delay_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "remaining": self.remaining,
            "methods": sorted(self.methods),
            "retry_after": self.retry_after_s,
            "status": self.status,
            "delay_s": self.delay_s,
        }


@dataclass
class EmulatorState:
    """What the emulator received and what it was told to do; readable from in-process tests.

    `messages` are the bot's (what the door sent), each `{"message_id", "chat_id", "text",
    "disable_notification", "received_at", "reply_markup", "edits", "reply_to_message_id"}`;
    `owner_messages` are the ones played through `/emulator/owner/text`. Both share the per-chat
    message numbering, as a Telegram chat does."""

    token: str | None = None
    log_path: Path | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    owner_messages: list[dict[str, Any]] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    faults: list[Fault] = field(default_factory=list)
    #: Telegram's flood control (`--flood-limits`), None when off
    flood: FloodLimits | None = None
    #: sendMessage calls answered 429 by the flood control
    too_many_requests: int = 0
    updates: UpdateQueue = field(default_factory=UpdateQueue)
    #: callback query id -> whether it was answered
    callback_queries: dict[str, bool] = field(default_factory=dict)
    #: every accepted answerCallbackQuery, in order
    callback_answers: list[dict[str, Any]] = field(default_factory=list)
    #: the last setMyCommands list
    commands: list[dict[str, str]] = field(default_factory=list)
    #: answers a client cannot read, armed per method (`replies`)
    reply_shapes: ReplyShapes = field(default_factory=ReplyShapes)
    #: groups upgraded to supergroups: the group's chat id (as text) -> the supergroup's
    migrated: dict[str, int] = field(default_factory=dict)
    #: the chats whose user blocked the bot (`owner.block`): every write refused 403
    blocked: set[str] = field(default_factory=set)
    #: the webhook setWebhook set (getUpdates is refused 409 while one is), None: none
    webhook_url: str | None = None
    _next_message_ids: dict[str, int] = field(default_factory=dict)
    _by_chat: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    _log_file: TextIO | None = field(default=None, repr=False)

    def texts(self) -> list[str]:
        return [message["text"] for message in self.messages]

    def arm(self, fault: Fault) -> None:
        self.faults.append(fault)

    def take_fault(self, method: str) -> Fault | None:
        for fault in self.faults:
            if method in fault.methods:
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _number(self, chat_id: int | str) -> int:
        key = str(chat_id)
        message_id = self._next_message_ids.get(key, 1)
        self._next_message_ids[key] = message_id + 1
        return message_id

    def keep(
        self,
        chat_id: int | str,
        text: str,
        *,
        disable_notification: bool = False,
        reply_markup: dict[str, Any] | None = None,
        reply_to_message_id: int | None = None,
    ) -> dict[str, Any]:
        """Keep a message the bot sent; it gets the chat's next message id."""
        message_id = self._number(chat_id)
        record: dict[str, Any] = {
            "message_id": message_id,
            "chat_id": chat_id,
            "text": text,
            "disable_notification": disable_notification,
            "received_at": time.time(),
            "reply_markup": reply_markup,
            "edits": [],
            "reply_to_message_id": reply_to_message_id,
        }
        self.messages.append(record)
        self._by_chat[(str(chat_id), message_id)] = record
        return record

    def keep_owner(self, message: dict[str, Any]) -> dict[str, Any]:
        """Keep a message from a user (`message` in the Bot API's shape, without its id); it
        gets the chat's next message id."""
        chat_id = message["chat"]["id"]
        record = {"message_id": self._number(chat_id), **message}
        self.owner_messages.append(record)
        self._by_chat[(str(chat_id), record["message_id"])] = record
        return record

    def migrate(self, chat_id: int, to_chat_id: int | None = None) -> int:
        """Upgrade the group `chat_id` to a supergroup (`to_chat_id`, else `-100` and the
        group's digits, as Telegram numbers supergroups); its id. From then on every call that
        writes to the group is refused with `migrate_to_chat_id`, as the Bot API refuses it."""
        if chat_id >= 0:
            raise ValueError("only a group (a negative chat id) can become a supergroup")
        new = to_chat_id if to_chat_id is not None else int(f"-100{-chat_id}")
        if new >= 0 or new == chat_id:
            raise ValueError("the supergroup's id must be negative and not the group's")
        self.migrated[str(chat_id)] = new
        return new

    def writable(self, chat_id: int | str) -> None:
        """Refuse a write to a group that became a supergroup, as the Bot API does: 400 with
        `parameters.migrate_to_chat_id`."""
        new = self.migrated.get(str(chat_id))
        if new is not None:
            raise Refusal(MIGRATED, parameters={"migrate_to_chat_id": new})
        if str(chat_id) in self.blocked:
            status, description = REFUSALS["bot_blocked"]
            raise Refusal(description, status=status)

    def find(self, chat_id: int | str, message_id: int) -> dict[str, Any] | None:
        """The kept message `message_id` of that chat (the bot's or a user's), or None."""
        return self._by_chat.get((str(chat_id), message_id))

    def is_bot_message(self, record: dict[str, Any]) -> bool:
        return "from" not in record

    def write_log(self, record: dict[str, Any]) -> None:
        """Append `record` to the JSON-lines log, when there is one (opened on first use and
        kept open; flushed per line)."""
        if self.log_path is None:
            return
        log_file = self.open_log()
        log_file.write(json.dumps(record) + "\n")
        log_file.flush()

    def open_log(self) -> TextIO:
        """The JSON-lines log, opened for appending if it is not (`OSError` when it cannot be:
        the emulator's start says so in one line rather than fail the first receipt)."""
        assert self.log_path is not None
        if self._log_file is None:
            # 0600 whatever the umask (the messages are the owner's), never through a link.
            private_file(self.log_path)
            flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
            descriptor = os.open(self.log_path, flags)
            self._log_file = os.fdopen(descriptor, "a", encoding="utf-8")
        return self._log_file

    def close_log(self) -> None:
        """Close the receipt file (the emulator's shutdown); a later receipt opens it again."""
        handle, self._log_file = self._log_file, None
        if handle is not None:
            handle.close()

    def reset(self) -> None:
        """Forget every message, update, callback query and answer, the commands, the calls
        counted and the faults (the JSON lines file is kept; ids keep counting)."""
        self.messages.clear()
        self.owner_messages.clear()
        # message ids keep counting per chat, as Telegram's do: a message the door remembers
        # from before the reset is never confused with a new one
        self._by_chat.clear()
        self.updates.reset()
        self.callback_queries.clear()
        self.callback_answers.clear()
        self.commands = []
        self.calls.clear()
        self.faults.clear()
        self.reply_shapes.clear()
        self.too_many_requests = 0
        self.migrated.clear()
        self.blocked.clear()
        self.webhook_url = None
        if self.flood is not None:
            self.flood = FloodLimits()


class _Bucket:
    """`capacity` sends, refilled at `per_s`; starts full."""

    def __init__(self, capacity: float, per_s: float) -> None:
        self.capacity = capacity
        self.per_s = per_s
        self.tokens = capacity
        self.at = time.monotonic()

    def wait_s(self, now: float) -> float:
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.per_s)
        self.at = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.per_s


@dataclass
class FloodLimits:
    """Telegram's flood control as the Bot API documents it: about 1 message/s per private
    chat (a burst of 3), 20/min per group (negative ids and @channels, the same burst), 30/s
    overall. A send past them is refused 429 with `retry_after` (whole seconds, rounded up)."""

    chats: dict[str, _Bucket] = field(default_factory=dict)
    overall: _Bucket = field(default_factory=lambda: _Bucket(PER_BOT_BURST, PER_BOT_PER_S))

    def admit(self, chat_id: int | str) -> int | None:
        """None when the send may go; else the seconds Telegram would ask it to wait."""
        key = str(chat_id)
        if key not in self.chats:
            private = key.isdigit()
            self.chats[key] = _Bucket(
                PER_CHAT_BURST, PER_PRIVATE_CHAT_PER_S if private else PER_GROUP_PER_S
            )
        now = time.monotonic()
        waits = [self.chats[key].wait_s(now), self.overall.wait_s(now)]
        if max(waits) > 0:
            return max(1, math.ceil(max(waits)))
        self.chats[key].tokens -= 1.0
        self.overall.tokens -= 1.0
        return None


def parse_fault(document: Any) -> Fault:
    """A `Fault` from the control endpoint's JSON, or ValueError saying what is wrong."""
    if not isinstance(document, dict):
        raise ValueError("a fault is a JSON object")
    mode = str(document.get("mode", ""))
    if mode not in FAULT_MODES:
        raise ValueError(f"mode must be one of {sorted(FAULT_MODES)}, got {mode!r}")
    count = int(document.get("count", 1))
    if not 1 <= count <= MAX_FAULT_COUNT:
        raise ValueError(f"count must be 1..{MAX_FAULT_COUNT}")
    status = int(document.get("status", 500))
    if not 500 <= status <= 599:
        raise ValueError("status must be a 5xx code")
    delay_s = float(document.get("delay_s", 0.0))
    if not 0 <= delay_s <= MAX_FAULT_DELAY_S:
        raise ValueError(f"delay_s must be 0..{MAX_FAULT_DELAY_S:g}")
    retry_after = int(document.get("retry_after", 1))
    if retry_after < 1:
        raise ValueError("retry_after must be at least 1 second")
    if not isinstance(document.get("replace", False), bool):
        raise ValueError("replace must be true or false")
    methods = document.get("methods", ["sendMessage"])
    if not isinstance(methods, list) or not all(isinstance(m, str) for m in methods):
        raise ValueError("methods must be a list of Bot API method names")
    return Fault(
        mode=mode,
        remaining=count,
        methods=frozenset(m.lower() for m in methods),
        retry_after_s=retry_after,
        status=status,
        delay_s=delay_s,
    )
