"""The phone's commands run (chief/phone/commands.py): /requests rings the owner's requests with
choices again through the asks' `reask` (and lists them when there is none, or it fails), the
ledger service's failures read in plain words, /quiet is kept in chief.db and in the override
the sender reads. The ledger's summary and the asks are doubles (other helpers' parts and an
outside party); chief.db is a real file. The same commands against a real `coop serve` are
tests/e2e/door/test_door_phone.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from chief.errors import ChiefError, EngineUnavailable, EngineUnreachable
from chief.phone.commands import Commands
from chief.phone.commands_text import NOT_ANSWERING, NOT_RUNNING, Command, QuietOverride
from chief.store import ChiefStore
from chief.telegram.inbound import Buttons

NOW = 1_800_000_000.0


class Summary:
    """The ledger service's summary, as a double: a document, or the error to raise."""

    def __init__(self, answer: dict[str, Any] | Exception) -> None:
        self.answer = answer

    async def summary(self) -> dict[str, Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Asks:
    """The asks' part, recorded; `refuse` names request ids whose reask fails."""

    def __init__(self, refuse: Sequence[int] = ()) -> None:
        self.asked: list[int] = []
        self.refuse = set(refuse)

    async def reask(self, request: dict[str, Any]) -> None:
        if request["id"] in self.refuse:
            raise ChiefError("chief.db is full")
        self.asked.append(int(request["id"]))


class Replies:
    async def reply(
        self,
        chat_id: int,
        text: str,
        *,
        buttons: Buttons | None = None,
        reply_to: int | None = None,
    ) -> int:
        raise AssertionError("answer() does not send")


def _request(request_id: int, to: str, choices: list[str] | None) -> dict[str, Any]:
    return {
        "id": request_id,
        "title": f"request {request_id}",
        "status": "open",
        "taken_by": None,
        "addressed_to": to,
        "choices": choices,
        # The ledger gives a request filed to the owner its ask key; none to anyone else.
        "ask_key": f"q-{request_id:032x}" if to == "owner" else None,
    }


LEDGER = {
    "owner": "owner",
    "todos": {"open": 0, "items": []},
    "requests": {
        "open": 3,
        "items": [
            _request(1, "owner", ["approve", "decline"]),
            _request(2, "owner", None),  # answered by a text reply: listed
            _request(3, "builder", ["a", "b"]),  # to someone else: listed
        ],
    },
    "oldest": None,
    "outbox": {"pending": 0},
}


async def _answer(
    store: ChiefStore,
    text: str,
    *,
    engine: Summary | None = None,
    asks: Asks | None = None,
    quiet: QuietOverride | None = None,
) -> str:
    async def queue() -> dict[str, Any]:
        return {"depth": 0}

    commands = Commands(
        Replies(),  # type: ignore[arg-type]
        engine=engine,
        store=store,
        quiet=quiet or QuietOverride(),
        telegram_queue=queue,
        asks=asks,
        clock=lambda: NOW,
    )
    name, _, argument = text.removeprefix("/").partition(" ")
    return await commands.answer(Command(name, argument))


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with ChiefStore.open(tmp_path / "chief.db") as opened:
        yield opened


async def test_requests_rings_the_owners_requests_with_choices_again(store: ChiefStore) -> None:
    asks = Asks()
    text = await _answer(store, "/requests", engine=Summary(LEDGER), asks=asks)
    assert asks.asked == [1]
    assert text.splitlines() == [
        "3 open requests:",
        "#1: asked again, with its buttons",
        "request #2 request 2",
        "request #3 request 3 [a / b]",
    ]


async def test_requests_without_the_asks_lists_every_request(store: ChiefStore) -> None:
    text = await _answer(store, "/requests", engine=Summary(LEDGER))
    assert "request #1 request 1 [approve / decline]" in text.splitlines()


async def test_a_request_that_could_not_be_asked_again_is_listed(store: ChiefStore) -> None:
    asks = Asks(refuse=[1])
    text = await _answer(store, "/requests", engine=Summary(LEDGER), asks=asks)
    assert asks.asked == []
    assert "request #1 request 1 [approve / decline]" in text.splitlines()


@pytest.mark.parametrize("command", ["/status", "/todos", "/requests"])
async def test_the_ledger_services_failures_read_in_plain_words(
    store: ChiefStore, command: str
) -> None:
    gone = await _answer(store, command, engine=Summary(EngineUnreachable()))
    assert gone.splitlines()[0] == NOT_RUNNING
    stuck = await _answer(store, command, engine=Summary(EngineUnreachable(timed_out=True)))
    assert stuck.splitlines()[0] == NOT_ANSWERING
    failed = await _answer(store, command, engine=Summary(EngineUnavailable("503")))
    assert (
        failed.splitlines()[0] == "The ledger service could not answer now; try again in a minute."
    )


async def test_quiet_is_kept_in_chief_db_and_in_the_senders_override(store: ChiefStore) -> None:
    quiet = QuietOverride()
    assert (await _answer(store, "/quiet 90m", quiet=quiet)).startswith("Quiet for 1h 30m")
    assert quiet.until == NOW + 5400
    assert (await store.inbox_state()).quiet_until == NOW + 5400
    assert (await _answer(store, "/quiet off", quiet=quiet)).startswith("Quiet is off")
    assert quiet.until is None
    assert (await store.inbox_state()).quiet_until is None
    assert (await _answer(store, "/quiet 0m", quiet=quiet)).startswith("Say /quiet")
    assert quiet.until is None
