"""The phone's routes of the owner app on a real uvicorn (loopback, port 0) over a real ledger:
the strict body, the kick after a committed close (never after an answer that changed
nothing), an answer naming another ask key (`not_this_request`: nothing changes, no kick), a
service key unusable at start, a database failure answering 503 with nothing filed, and two
keys racing through HTTP in local mode (each request on its own connection)."""

from __future__ import annotations

import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.owner import phone
from engine.owner.app import Owner, create_app
from tests.support.asgi import serve_asgi_in_thread
from tests.support.ledger import ledger
from tests.support.procs import write_key

KEY = "phone-routes-key-0123456789"
ANSWER = phone.ANSWER_PATH
RACE_ROUNDS = 10
TIMEOUT_S = 10.0


@dataclass
class App:
    url: str
    db: Path
    kicks: list[int] = field(default_factory=list)

    def answer(self, body: dict[str, Any], key: str = KEY) -> httpx.Response:
        with httpx.Client(timeout=TIMEOUT_S, trust_env=False) as client:
            return client.post(self.url + ANSWER, json=body, headers={"X-Coop-Service-Key": key})


def _serve(home: Path, service_key: phone.ServiceKey | None = None) -> Iterator[App]:
    db = (home / "coop.db").resolve()
    service = Owner(db)
    service.connect().close()
    kicks: list[int] = []
    app = create_app(service, kick=lambda: kicks.append(1), service_key=service_key)
    try:
        with serve_asgi_in_thread(app, lifespan="off") as url:
            yield App(url, db, kicks)
    finally:
        service.close()


@pytest.fixture
def local(home: Path) -> Iterator[App]:
    """The owner app in local mode, its service key read at start from COOP_HOME."""
    write_key(home / "service.key", KEY)
    yield from _serve(home)


def _ask(app: App, choices: str | None = "approve,decline") -> int:
    found = ledger.add_request(
        "order?", actor="agent", addressed_to="owner", choices=choices, db=str(app.db)
    )
    return int(found["request"]["id"])


def new_key() -> str:
    return "a-" + secrets.token_hex(16)


def ask_key(app: App, request_id: int) -> str:
    """The ask key the ledger drew for the request (what the door's answers name)."""
    with closing(sqlite3.connect(app.db)) as conn:
        (found,) = conn.execute(
            "SELECT ask_key FROM requests WHERE id = ?", (request_id,)
        ).fetchone()
    return str(found)


NO_SUCH_ASK = "q-" + "0" * 32
A = NO_SUCH_ASK  # a well-formed ask key: each body below is out of shape for one reason


@pytest.mark.parametrize(
    "body",
    [
        {"request_id": 1, "ask_key": A, "choice": "approve"},
        {"answer_key": "a-123", "request_id": 1, "ask_key": A, "choice": "approve"},
        {"answer_key": "A-" + "0" * 32, "request_id": 1, "ask_key": A, "choice": "approve"},
        {"answer_key": "a-" + "0" * 32, "request_id": "1", "ask_key": A, "choice": "approve"},
        {"answer_key": "a-" + "0" * 32, "request_id": 0, "ask_key": A, "choice": "approve"},
        {"answer_key": "a-" + "0" * 32, "request_id": 2**63, "ask_key": A, "choice": "approve"},
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": A},
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": A, "choice": "a", "text": "b"},
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": A, "text": ""},
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": A, "text": "x" * 4001},
        {
            "answer_key": "a-" + "0" * 32,
            "request_id": 1,
            "ask_key": A,
            "choice": "approve",
            "via": "cli",
        },
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "choice": "approve"},  # no ask key
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": "q-1", "choice": "approve"},
        {"answer_key": "a-" + "0" * 32, "request_id": 1, "ask_key": 1, "choice": "approve"},
    ],
    ids=lambda body: ",".join(f"{k}={str(v)[:10]}" for k, v in body.items()),
)
def test_a_body_out_of_shape_is_422_and_changes_nothing(local: App, body: dict[str, Any]) -> None:
    _ask(local)
    refused = local.answer(body)
    assert refused.status_code == 422, refused.text
    assert ledger.show_request(1, db=str(local.db))["request"]["status"] == "open"
    assert local.kicks == []


def test_a_committed_close_kicks_and_an_answer_that_changed_nothing_does_not(local: App) -> None:
    request_id = _ask(local)
    asked = {"request_id": request_id, "ask_key": ask_key(local, request_id)}
    noted = local.answer({"answer_key": new_key(), **asked, "text": "hm"})
    wrong = local.answer({"answer_key": new_key(), **asked, "choice": "maybe"})
    other = local.answer(
        {
            "answer_key": new_key(),
            "request_id": request_id,
            "ask_key": NO_SUCH_ASK,
            "choice": "approve",
        }
    )
    assert (noted.json()["outcome"], wrong.json()["outcome"]) == ("noted", "not_a_choice")
    assert other.json()["outcome"] == "not_this_request"
    assert "no longer in the ledger" in other.json()["detail"]
    assert other.json()["request"]["status"] == "open"
    assert local.kicks == []
    closed = local.answer({"answer_key": new_key(), **asked, "choice": "approve"})
    assert closed.json()["outcome"] == "closed"
    assert set(closed.json()) == {"outcome", "detail", "request"}
    assert local.kicks == [1]


def test_a_service_key_unusable_at_start_answers_503(home: Path) -> None:
    key_file = write_key(home / "service.key", KEY, mode=0o644)
    for app in _serve(home):
        refused = app.answer(
            {"answer_key": new_key(), "request_id": 1, "ask_key": NO_SUCH_ASK, "choice": "approve"}
        )
        assert refused.status_code == 503
        assert "chmod 600" in refused.json()["detail"]
        assert str(key_file) in refused.json()["detail"]


def test_a_database_failure_answers_503_and_the_retry_applies_once(
    local: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    request_id = _ask(local)
    full = tmp_path / "disk-full"
    full.touch()
    monkeypatch.setenv("COOP_TEST_FAULTS", f"engine.outbox.after_insert:raise-while={full}")
    body = {
        "answer_key": new_key(),
        "request_id": request_id,
        "ask_key": ask_key(local, request_id),
        "choice": "approve",
    }
    failed = local.answer(body)
    assert failed.status_code == 503, failed.text
    with closing(sqlite3.connect(local.db)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM coop_answers").fetchone()[0] == 0
    full.unlink()
    assert local.answer(body).json()["outcome"] == "closed"
    assert local.answer(body).json()["outcome"] == "closed"
    events = ledger.history("request", request_id, db=str(local.db))
    assert [e["event"] for e in events] == ["add", "close"]


def _race(app: App, request_id: int) -> list[str]:
    """Two taps with two keys, each on its own thread, let go at one instant: their outcomes."""
    barrier = threading.Barrier(2, timeout=TIMEOUT_S)
    outcomes: list[str] = []

    def tap(choice: str) -> None:
        barrier.wait()
        body = {
            "answer_key": new_key(),
            "request_id": request_id,
            "ask_key": ask_key(app, request_id),
            "choice": choice,
        }
        outcomes.append(app.answer(body).json()["outcome"])

    threads = [threading.Thread(target=tap, args=(c,)) for c in ("approve", "decline")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S)
    return outcomes


def test_two_keys_racing_through_http_close_the_request_once(local: App) -> None:
    for _ in range(RACE_ROUNDS):
        request_id = _ask(local)
        assert sorted(_race(local, request_id)) == ["already_closed", "closed"]
        events = ledger.history("request", request_id, db=str(local.db))
        assert [e["event"] for e in events] == ["add", "close"]
