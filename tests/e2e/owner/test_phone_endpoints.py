"""The phone's routes on a real `coop serve` process (issue 21): the owner's answer relayed by
the door, applied exactly once in local mode and after `coop cutover`, the summary `/status`
reads, the guard, and a service SIGKILLed after the answer committed but before it replied."""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.owner.conftest import ServeProcess, ok
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.waiting import wait_until_sync

ANSWER = "/api/coop/phone/answer"
SUMMARY = "/api/coop/phone/summary"
KEY_HEADER = "X-Coop-Service-Key"
TIMEOUT_S = 10.0


def _key(env: dict[str, str]) -> str:
    return Path(env["COOP_SERVICE_KEY_FILE"]).read_text().strip()


def answer_key() -> str:
    return "a-" + secrets.token_hex(16)


def post_answer(
    serve: ServeProcess, env: dict[str, str], body: dict[str, Any], **headers: str
) -> httpx.Response:
    return serve.post(  # type: ignore[no-any-return]
        ANSWER, json=body, headers={KEY_HEADER: _key(env), **headers}, timeout=TIMEOUT_S
    )


def summary(serve: ServeProcess, env: dict[str, str]) -> dict[str, Any]:
    answer = serve.get(SUMMARY, headers={KEY_HEADER: _key(env)}, timeout=TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def events(env: dict[str, str], request_id: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    with closing(sqlite3.connect(env["COOP_DB"])) as conn:
        rows = conn.execute(
            "SELECT event, actor, payload FROM coop_events WHERE item_kind = 'request'"
            " AND item_id = ? ORDER BY id",
            (request_id,),
        ).fetchall()
    return [(e, a, None if p is None else json.loads(p)) for e, a, p in rows]


def outbox_extras(env: dict[str, str]) -> list[tuple[str, dict[str, Any] | None]]:
    with closing(sqlite3.connect(env["COOP_DB"])) as conn:
        rows = conn.execute("SELECT kind, extra FROM coop_outbox ORDER BY id").fetchall()
    return [(kind, None if extra is None else json.loads(extra)) for kind, extra in rows]


def ask_key_of(env: dict[str, str], request_id: int) -> str:
    """The ask key the ledger drew for the request (what the door's answers name)."""
    with closing(sqlite3.connect(env["COOP_DB"])) as conn:
        row = conn.execute("SELECT ask_key FROM requests WHERE id = ?", (request_id,)).fetchone()
    return str(row[0])


def _ask(env: dict[str, str], title: str = "order the bigger bag?") -> int:
    out = ok(env, "request", "add", title, "--to", "owner", "--choices", "approve,decline")
    return int(out.split("#", 1)[1].split()[0])


def _cutover(serve: ServeProcess, env: dict[str, str]) -> None:
    ok(env, "cutover")


@pytest.mark.parametrize("mode", ["local", "service"])
def test_a_tap_closes_the_request_once_and_a_retry_answers_the_same(
    serve: ServeProcess, stack_env: dict[str, str], mode: str
) -> None:
    serve.start()
    if mode == "service":
        _cutover(serve, stack_env)
    request_id = _ask(stack_env)
    key = answer_key()
    body = {
        "answer_key": key,
        "request_id": request_id,
        "ask_key": ask_key_of(stack_env, request_id),
        "choice": "decline",
    }

    first = post_answer(serve, stack_env, body)
    again = post_answer(serve, stack_env, body)

    assert first.status_code == again.status_code == 200, first.text
    assert first.json()["outcome"] == again.json()["outcome"] == "closed"
    assert first.json()["detail"] == again.json()["detail"]
    request = first.json()["request"]
    assert (request["status"], request["closed_by"], request["result_summary"]) == (
        "closed",
        "owner",
        "decline",
    )
    assert request["choices"] == ["approve", "decline"]
    closes = [(a, p) for e, a, p in events(stack_env, request_id) if e == "close"]
    assert closes == [
        ("owner", {"via": "telegram", "answer_key": key, "choice": "decline", "fast_path": True})
    ]
    assert outbox_extras(stack_env)[-1] == (
        "request_closed",
        {
            "settles": {"request_id": request_id, "key": ask_key_of(stack_env, request_id)},
            "ring": False,
        },
    )
    # A second key for the same request: the first close is the record.
    late = post_answer(serve, stack_env, {**body, "answer_key": answer_key(), "choice": "approve"})
    assert late.json()["outcome"] == "already_closed"
    assert late.json()["detail"] == (
        f"request #{request_id} was already closed by owner from Telegram: decline"
    )


def test_the_summary_shows_open_items_and_the_outbox(
    serve: ServeProcess, stack_env: dict[str, str]
) -> None:
    serve.start()
    ok(stack_env, "todo", "add", "water the plants")
    request_id = _ask(stack_env)
    found = summary(serve, stack_env)
    assert found["owner"] == "owner"
    assert found["todos"]["open"] == 1
    assert [i["title"] for i in found["todos"]["items"]] == ["water the plants"]
    assert found["requests"]["items"][0]["id"] == request_id
    assert found["requests"]["items"][0]["choices"] == ["approve", "decline"]
    assert found["requests"]["items"][0]["ask_key"] == ask_key_of(stack_env, request_id)
    assert found["oldest"]["kind"] == "todo"
    assert found["oldest"]["age_s"] >= 0
    # No door listens (the stack's door URL is a closed port): both rows wait, one has failed.
    assert found["outbox"]["pending"] == 1
    assert set(found["outbox"]) == {"pending", "oldest_pending_age_s", "last_error"}


#: What the guard refuses, in its order: no key, a wrong key, a Host that is not loopback (DNS
#: rebinding), a browser's header.
REFUSED = [
    ({KEY_HEADER: ""}, 401),
    ({KEY_HEADER: "not-the-key"}, 403),
    ({"Host": "coop.example"}, 403),
    ({"Origin": "http://127.0.0.1"}, 403),
]


def test_the_guard_refuses_before_anything_runs(
    serve: ServeProcess, stack_env: dict[str, str]
) -> None:
    serve.start()
    request_id = _ask(stack_env)
    body = {
        "answer_key": answer_key(),
        "request_id": request_id,
        "ask_key": ask_key_of(stack_env, request_id),
        "choice": "approve",
    }
    for headers, status in REFUSED:
        sent = {KEY_HEADER: _key(stack_env), **headers}
        refused = serve.post(ANSWER, json=body, headers=sent, timeout=TIMEOUT_S)
        looked = serve.get(SUMMARY, headers=sent, timeout=TIMEOUT_S)
        assert (refused.status_code, looked.status_code) == (status, status), headers
        assert isinstance(refused.json()["detail"], str)
    assert [e for e, _, _ in events(stack_env, request_id)] == ["add"]


@pytest.mark.parametrize("mode", ["local", "service"])
def test_a_service_killed_after_the_commit_answers_the_retry_once(
    serve: ServeProcess, stack_env: dict[str, str], mode: str, tmp_path: Path
) -> None:
    serve.start()
    if mode == "service":
        _cutover(serve, stack_env)
    request_id = _ask(stack_env)
    serve.terminate()
    hold = tmp_path / "hold-after-commit"
    hold.touch()
    serve.start(faults=f"engine.phone.after_commit:pause-while={hold}")
    key = answer_key()
    body = {
        "answer_key": key,
        "request_id": request_id,
        "ask_key": ask_key_of(stack_env, request_id),
        "choice": "approve",
    }

    lost: list[BaseException] = []

    def first_try() -> None:
        try:
            post_answer(serve, stack_env, body)
        except httpx.TransportError as exc:  # the reply never comes: the service is killed
            lost.append(exc)

    sender = threading.Thread(target=first_try)
    sender.start()
    serve.wait_for(lambda: Path(f"{hold}.reached").exists(), "the answer to commit")
    assert [e for e, _, _ in events(stack_env, request_id)] == ["add", "close"]  # committed
    serve.kill()  # SIGKILL between the commit and the reply
    sender.join(TIMEOUT_S)
    assert len(lost) == 1
    hold.unlink()
    serve.start()
    retried = post_answer(serve, stack_env, body)

    assert retried.status_code == 200, retried.text
    assert retried.json()["outcome"] == "closed"
    assert retried.json()["request"]["result_summary"] == "approve"
    assert [e for e, _, _ in events(stack_env, request_id)] == ["add", "close"]


def test_the_rows_reach_a_recording_door_with_their_extras(
    serve: ServeProcess, stack_env: dict[str, str]
) -> None:
    """`coop serve`'s own notifier sends the ask when the request is filed and the settle of the
    phone's close, without a ring back. The far end is the recorder test door: the Chief's door
    refuses these fields until it learns them (tests/integration/door/test_door_phone_extras.py)."""
    door = TestDoor(key=_key(stack_env), batch_route=True)
    with serve_door_in_thread(door, Path(stack_env["COOP_HOME"]) / "door.sock") as path:
        serve.env["COOP_DOOR_SOCKET"] = path
        # Filed before `coop serve` starts, so its daemon's first drain finds it: these tests
        # send no kick (COOP_KICK=off), and a row filed just after that drain waited for the
        # daemon's 300 s backstop (the test timed out on a loaded machine).
        request_id = _ask(stack_env)
        serve.start()
        wait_until_sync(lambda: len(door.received) == 1, timeout_s=TIMEOUT_S, what="the ask")
        taken = post_answer(
            serve,
            stack_env,
            {
                "answer_key": answer_key(),
                "request_id": request_id,
                "ask_key": ask_key_of(stack_env, request_id),
                "choice": "approve",
            },
        )
        assert taken.json()["outcome"] == "closed"
        wait_until_sync(lambda: len(door.received) == 2, timeout_s=TIMEOUT_S, what="the settle")
    ask, settle = door.received
    assert ask["kind"] == "request_added"
    key = ask_key_of(stack_env, request_id)
    assert ask["ask"] == {
        "request_id": request_id,
        "key": key,
        "title": "order the bigger bag?",
        "choices": ["approve", "decline"],
    }
    assert settle["kind"] == "request_closed"
    assert (settle["settles"], settle["ring"]) == ({"request_id": request_id, "key": key}, False)
    assert (
        settle["text"] == f"request #{request_id} closed by owner: order the bigger bag?\napprove"
    )
