"""The compat endpoint's guard over real HTTP, and the service's answer in local mode."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from engine import ledger
from engine.errors import GuardRefused
from engine.owner import compat, cutover
from engine.owner.app import guard_request
from engine.store import schema
from tests.integration.owner.conftest import RunningOwner


def _body() -> dict:
    args, kwargs = ["x"], {"actor": "agent"}
    return {"method": "add_todo", "args": args, "kwargs": kwargs, "key": "g" * 16}


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Origin", "http://127.0.0.1:8764"),
        ("Cookie", "session=1"),
        ("X-Forwarded-For", "10.0.0.1"),
        ("Forwarded", "for=10.0.0.1"),
        ("X-Forwarded-Host", "evil.example"),
        ("X-Session-Id", "abc"),
        ("Host", "evil.example"),
        ("Host", "127.0.0.1.evil.example:8764"),
    ],
)
def test_browser_proxy_and_rebinding_headers_are_refused(
    running: RunningOwner, header: str, value: str
) -> None:
    headers = {compat.CREDENTIAL_HEADER: running.credential(), header: value}

    answer = running.post(compat.CALL_PATH, json=_body(), headers=headers)

    assert answer.status_code == 403
    assert ledger.list_items() == []


@pytest.mark.parametrize("given", [None, "", "wrong", "x" * 200])
def test_a_missing_or_wrong_credential_is_refused(running: RunningOwner, given: str | None) -> None:
    headers = {} if given is None else {compat.CREDENTIAL_HEADER: given}

    answer = running.post(compat.CALL_PATH, json=_body(), headers=headers)

    assert answer.status_code == 401
    assert ledger.list_items() == []


def test_a_loopback_host_with_the_credential_passes(running: RunningOwner) -> None:
    headers = {compat.CREDENTIAL_HEADER: running.credential(), "Host": "localhost:1"}

    answer = running.post(compat.CALL_PATH, json=_body(), headers=headers)

    assert answer.status_code == 200
    assert answer.json()["outcome"] == "committed"


def test_a_peer_off_loopback_is_refused_first() -> None:
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/compat/call",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("192.0.2.7", 40000),
    }
    with pytest.raises(GuardRefused) as caught:
        guard_request(Request(scope))
    assert caught.value.status == 403
    assert "loopback callers only" in caught.value.message


def test_after_undo_the_service_refuses_compat_calls_and_callers_write_locally(
    running: RunningOwner,
) -> None:
    ledger.add_todo("in service mode", actor="agent")
    credential = running.credential()

    done = cutover.undo(actor="operator", db=running.db)

    triggers = len(schema.FENCED_TABLES) * len(schema.FENCED_OPERATIONS)
    assert any(f"dropped the fence ({triggers} triggers)" in line for line in done)
    assert not running.owner_file.exists()
    answer = running.post(
        compat.CALL_PATH,
        json=_body(),
        headers={compat.CREDENTIAL_HEADER: credential},
    )
    assert answer.status_code == 409
    assert "not the Coop owner" in answer.json()["detail"]
    assert running.get("/status").json()["mode"] == "local"
    ledger.add_todo("in local mode", actor="agent")
    assert [item["title"] for item in ledger.list_items()] == ["in service mode", "in local mode"]
    events = [e["event"] for e in _owner_events(running)]
    assert events == ["cutover", "cutover_undo"]


def _owner_events(running: RunningOwner) -> list[dict]:
    import sqlite3

    conn = sqlite3.connect(running.db)
    conn.row_factory = sqlite3.Row
    try:
        return [
            dict(r) for r in conn.execute("SELECT * FROM coop_events WHERE item_kind = 'owner'")
        ]
    finally:
        conn.close()


def test_a_second_cutover_is_refused_while_one_is_in_place(running: RunningOwner) -> None:
    from engine.errors import UsageError

    with pytest.raises(UsageError, match="already in service mode"):
        cutover.cutover(running.socket, actor="operator", db=running.db)
