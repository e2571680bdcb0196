"""The owner of the power-cut run: a person at the phone, played through the Telegram emulator's
control endpoints (`chief.telegram.emulator.owner`, `tests.support.phone`). Like the emulator,
the owner is not in the house: the owner lives through every cut, and a tap made while the door
is down waits in the emulator until the door polls again.

The owner looks at the chat a few times a second. The first time a nag's message shows buttons
(an ask's choices, an urgent report's "Got it"), the owner decides, seeded, whether and when to
tap it: an ask's choice at a moment that may fall before or after its deadline (they race), a
"Got it" at a moment that may fall before or after a repeat or the expiry (sometimes twice, a
double tap). The nag's kind (its text says it: `nag T-3 [remind]: ...`) shapes that, so every run
rings each thing the run checks (`NagFigures.unexercised`): a `deadline` request is never
tapped (its deadline applies), a `remind` request is looked at only once a reminder of it
showed, a `shout` only once it rang again (`URGENT, again`); an `urgent` request is decided at
its first ring, so a tap still races every stop. When the moment comes the tap goes to the
newest message of that nag that still shows the button (a reminder carries the ask's buttons;
a repeat carries the live "Got it"); none left (settled, acknowledged, expired) is counted, as
is a tap the emulator refuses because an edit took the button in between.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.powercut.nag_producer import CHOICES
from tests.support.phone import EmulatorOwner
from tests.support.stack import CHAT_ID

OWNER_ID = int(CHAT_ID)  # a private chat: its id is its user's, the obeyed user
LOOK_S = 0.25  # how often the owner looks at the phone
GOT_IT = "Got it"  # the contract's label (chief.urgent_rules.GOT_IT)
LABEL = re.compile(r"nag [\w.]+-\d+")
KIND = re.compile(r"nag [\w.]+-\d+ \[(\w+)\]")
# What must show of a nag of this kind before the owner decides on it (None: never decided).
WAIT_FOR: dict[str, re.Pattern[str] | None] = {
    "deadline": None,  # its deadline applies: every run applies one
    "remind": re.compile(r"(\(possible repeat\) )?Reminder"),  # every run rings a reminder
    "shout": re.compile(r"(\(possible repeat\) )?URGENT, again"),  # and an urgent repeat
}
TAP_SHARE = 0.6  # of the asks, tapped (a choice)
TAP_WITHIN_S = 4.0  # a choice, within this long of the ask's first ring: it races the deadline
ACK_SHARE = 0.7  # of the urgent reports, acknowledged ("Got it")
DOUBLE_SHARE = 0.25  # of the acknowledgements, tapped twice


@dataclass(order=True)
class Tap:
    at: float  # epoch seconds
    label: str = field(compare=False)
    button: str = field(compare=False)


def buttons(message: dict[str, Any]) -> list[str]:
    """The labels of the buttons a message shows now."""
    markup = message.get("reply_markup") or {}
    return [b["text"] for row in markup.get("inline_keyboard", []) for b in row]


class Owner:
    """The owner's thread: `start()`, then `stop()` before the emulator stops; `taps` counts what
    was done (`choice`, `got_it`, each also `..._gone` and `..._refused`; `looks_failed`)."""

    def __init__(self, emulator_url: str, rng: random.Random, *, ack_within_s: float) -> None:
        self.phone = EmulatorOwner(emulator_url)
        self.rng = rng
        self.ack_within_s = ack_within_s
        self.seen: set[tuple[str, str]] = set()  # (label, kind) decided already
        self.due: list[Tap] = []
        self.taps: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="powercut-owner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop looking (idempotent: a failed run's teardown stops it again)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=30.0)
        self.phone.close()

    def _run(self) -> None:
        while not self._stop.wait(LOOK_S):
            try:
                messages = self.phone.messages()
            except (httpx.HTTPError, AssertionError):  # looks again a moment later
                self.taps["looks_failed"] += 1
                continue
            self._decide(messages)
            self._tap_due(messages)

    def _decide(self, messages: list[dict[str, Any]]) -> None:
        """A seeded plan for each nag the first time its buttons show, once its kind allows
        (`WAIT_FOR`)."""
        now = time.time()
        for message in messages:
            text = str(message.get("text", ""))
            found = LABEL.search(text)
            shown = buttons(message)
            if found is None or not shown or not ready(text, messages):
                continue
            name = found.group(0)
            if set(shown) & set(CHOICES) and (name, "choice") not in self.seen:
                self.seen.add((name, "choice"))
                if self.rng.random() < TAP_SHARE:
                    at = now + self.rng.uniform(0.2, TAP_WITHIN_S)
                    self.due.append(Tap(at, name, self.rng.choice(CHOICES)))
            if GOT_IT in shown and (name, "got_it") not in self.seen:
                self.seen.add((name, "got_it"))
                if self.rng.random() < ACK_SHARE:
                    at = now + self.rng.uniform(0.2, self.ack_within_s)
                    self.due.append(Tap(at, name, GOT_IT))
                    if self.rng.random() < DOUBLE_SHARE:
                        self.due.append(Tap(at + self.rng.uniform(0, 0.5), name, GOT_IT))
        self.due.sort()

    def _tap_due(self, messages: list[dict[str, Any]]) -> None:
        now = time.time()
        while self.due and self.due[0].at <= now:
            tap = self.due.pop(0)
            kind = "got_it" if tap.button == GOT_IT else "choice"
            # The owner's own chat: the second person's rung-2 ring is theirs to tap.
            showing = [
                m for m in messages
                if m.get("chat_id") == OWNER_ID and tap.label in str(m.get("text", ""))
                and tap.button in buttons(m)
            ]  # fmt: skip
            if not showing:
                self.taps[f"{kind}_gone"] += 1  # settled, acknowledged or expired already
                continue
            newest = max(showing, key=lambda m: int(m["message_id"]))
            try:
                self.phone.press(OWNER_ID, OWNER_ID, int(newest["message_id"]), text=tap.button)
            except (httpx.HTTPError, AssertionError):
                self.taps[f"{kind}_refused"] += 1  # an edit took the button in between
                continue
            self.taps[kind] += 1


def ready(text: str, messages: list[dict[str, Any]]) -> bool:
    """Whether the owner decides on the nag `text` belongs to now: its kind waits for nothing,
    or what it waits for (`WAIT_FOR`) has shown in the chat."""
    kind = KIND.search(text)
    if kind is None or kind.group(1) not in WAIT_FOR:
        return True
    wanted = WAIT_FOR[kind.group(1)]
    if wanted is None:
        return False
    label = kind.group(0)
    return any(
        label in str(m.get("text", "")) and wanted.match(str(m.get("text", ""))) for m in messages
    )
