"""The owner's answers across real processes: the Bot API emulator (playing the owner, through
tests.support.phone), the door (`chief serve`, long-polling it) and the ledger service (`coop
serve`, which the door's answers reach on its socket), over one data folder
(tests.support.stack). coop.db and chief.db are read with connections of the test's own, as an
operator would; requests are filed with `coop` processes.

`PhoneStack` is what a test reads and does: file a request to the owner (`ask`), wait for its
ask message, press a button or reply as the owner, and count per request what the owner sees
(the emulator's messages about it, its toasts) and what the ledger and the Chief recorded (its
close events, its Chief lines)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.phone import EmulatorOwner
from tests.support.phone_stack import make_stack, start
from tests.support.procs import coop
from tests.support.stack import CHAT_ID, SERVICE_KEY, SERVICE_KEY_HEADER, Stack

OWNER_ID = int(CHAT_ID)  # a private chat: its id is its user's, the obeyed user
STRANGER_ID = 777
WAIT_S = 15.0  # a bound on each wait, far above the second a tap takes


@dataclass
class PhoneStack:
    stack: Stack
    owner: EmulatorOwner

    # -- doing, as the agents and the owner do ------------------------------------------------

    def coop(self, *args: str, **settings: str) -> str:
        done = coop(*args, env=self.stack.env(**settings), inherit=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def ask(self, title: str, choices: str | None = "approve,decline") -> int:
        """`coop request add TITLE --to owner [--choices ...]`: the request's id."""
        extra = () if choices is None else ("--choices", choices)
        said = self.coop("request", "add", title, "--to", "owner", *extra)
        found = re.search(r"#(\d+)", said)
        assert found, said
        return int(found.group(1))

    def ask_message(self, request_id: int) -> dict[str, Any]:
        """The ask message that rang request `request_id` (waited for, bounded)."""
        return self.owner.wait_for(
            lambda _: next(iter(self.messages_about(request_id)), None),
            WAIT_S,
            f"request #{request_id}'s ask message",
        )

    def press(self, request_id: int, label: str, *, user: int = OWNER_ID) -> dict[str, Any]:
        """Press `label` on request `request_id`'s ask message as `user`."""
        message = self.ask_message(request_id)
        return self.owner.press(OWNER_ID, user, int(message["message_id"]), text=label)

    def reply(self, request_id: int, text: str) -> dict[str, Any]:
        message = self.ask_message(request_id)
        return self.owner.text(
            OWNER_ID, OWNER_ID, text, reply_to_message_id=int(message["message_id"])
        )

    # -- what the owner sees -------------------------------------------------------------------

    def messages_about(self, request_id: int) -> list[dict[str, Any]]:
        """The bot's messages in the owner's chat about request `request_id` (one per report)."""
        prefix = f"request #{request_id} "
        return [
            m
            for m in self.owner.messages()
            if m["chat_id"] == OWNER_ID and str(m["text"]).startswith(prefix)
        ]

    def toast(self, query_id: str) -> str:
        """The toast answered to callback query `query_id` (waited for, bounded)."""
        found = self.owner.wait_for(
            lambda o: [a for a in o.callback_answers() if a["callback_query_id"] == query_id],
            WAIT_S,
            f"the toast of {query_id}",
        )
        assert len(found) == 1, found
        return str(found[0]["text"])

    def toasts(self, query_id: str) -> list[dict[str, Any]]:
        return [a for a in self.owner.callback_answers() if a["callback_query_id"] == query_id]

    def settled_message(self, request_id: int) -> dict[str, Any]:
        """The ask message once edited to its outcome, its buttons gone (waited for)."""
        return self.owner.wait_for(
            lambda _: next(
                (m for m in self.messages_about(request_id)
                 if m["edits"] and not m.get("reply_markup")),
                None,
            ),
            WAIT_S,
            f"request #{request_id}'s ask message edited, its buttons removed",
        )  # fmt: skip

    def door_pending(self) -> tuple[int, float]:
        """The answers waiting for the ledger, as the door's status and its /metrics say."""
        status = self.stack.door_status()
        scraped = self.stack.door_request(
            "GET",
            "/metrics",
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        ).text
        gauge = next(
            float(line.split()[1])
            for line in scraped.splitlines()
            if line.startswith("coop_telegram_answers_pending ")
        )
        return int(status["answers_pending"]), gauge

    # -- what the ledger and the Chief recorded ------------------------------------------------

    def request(self, request_id: int) -> dict[str, Any]:
        with closing(sqlite3.connect(self.stack.coop_db)) as conn:
            conn.row_factory = sqlite3.Row
            row = conn.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone()
        assert row is not None, f"no request #{request_id}"
        return dict(row)

    def events(self, request_id: int, event: str) -> list[dict[str, Any]]:
        """Request `request_id`'s events named `event`, each with its payload decoded."""
        with closing(sqlite3.connect(self.stack.coop_db)) as conn:
            rows = conn.execute(
                "SELECT actor, at, payload FROM coop_events WHERE item_kind = 'request' "
                "AND item_id = ? AND event = ? ORDER BY id",
                (request_id, event),
            ).fetchall()
        return [
            {"actor": actor, "at": at, "payload": json.loads(payload) if payload else {}}
            for actor, at, payload in rows
        ]

    def closed_by_phone(self, request_id: int) -> dict[str, Any]:
        """The request once closed (waited for, bounded)."""
        return self.owner.wait_for(
            lambda _: (row := self.request(request_id))["status"] == "closed" and row,
            WAIT_S,
            f"request #{request_id} closed",
        )

    def chief_lines(self, request_id: int) -> int:
        """The Chief's lines reporting request `request_id` closed."""
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE content LIKE ?",
                (f"request #{request_id} closed by %",),
            ).fetchone()
        return int(count)

    def wait_chief_line(self, request_id: int) -> None:
        self.owner.wait_for(
            lambda _: self.chief_lines(request_id), WAIT_S, f"request #{request_id}'s Chief line"
        )

    def wait_answers(self, request_id: int, expected: list[tuple[str, str]]) -> None:
        """Wait (bounded) until the door's answer rows for the request are `expected`: the
        door records the ledger's reply a moment after the ledger's commit is visible."""
        self.owner.wait_for(
            lambda _: self.answers(request_id) == expected,
            WAIT_S,
            f"request #{request_id}'s answers to be {expected}",
        )

    def answers(self, request_id: int) -> list[tuple[str, str]]:
        """The door's answer rows for the request: (state, outcome)."""
        with closing(sqlite3.connect(self.stack.chief_db)) as conn:
            rows = conn.execute(
                "SELECT state, COALESCE(outcome, '') FROM telegram_answers WHERE request_id = ? "
                "ORDER BY rowid",
                (request_id,),
            ).fetchall()
        return [(str(state), str(outcome)) for state, outcome in rows]


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoneStack]:
    """One stack for the module's tests that leave its processes as they found them (each
    files requests of its own)."""
    yield from module_phone(tmp_path_factory, "phone")


def module_phone(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[PhoneStack]:
    """The body of a module-scoped phone fixture: the stack started, yielded, stopped with
    every exit 0."""
    stack = make_stack(tmp_path_factory.mktemp(name))
    try:
        start(stack)
        started = PhoneStack(stack, EmulatorOwner(stack.emulator.url))
        yield started
        started.owner.close()
        assert set(stack.stop().values()) == {0}
    finally:
        stack.close()


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack for a test that kills or arms its parts (`start` it, then `own(...)`)."""
    stack = make_stack(tmp_path)
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def own(own_stack: Stack) -> Iterator[Callable[..., PhoneStack]]:
    """`own(door_faults=..., engine_faults=...)`: the test's own stack started, armed so."""
    started: list[PhoneStack] = []

    def starter(**faults: str) -> PhoneStack:
        start(own_stack, **faults)
        started.append(PhoneStack(own_stack, EmulatorOwner(own_stack.emulator.url)))
        return started[-1]

    try:
        yield starter
    finally:
        for phone in started:
            phone.owner.close()
