"""`POST /compat/call` checks every routed call's arguments against the verb's signature before
anything runs: a wrong type is a 400 naming the parameter, never a 500; and a caller without the
credential learns nothing about the database."""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Any

import httpx
import pytest

from engine.owner import compat, cutover
from tests.integration.owner.conftest import RunningOwner


def _call(
    running: RunningOwner, method: str, args: list[Any], kwargs: dict[str, Any]
) -> httpx.Response:
    body = {"method": method, "args": args, "kwargs": kwargs, "key": uuid.uuid4().hex}
    headers = {compat.CREDENTIAL_HEADER: running.credential(), "Content-Type": "application/json"}
    # json.dumps escapes a lone surrogate as JSON allows (`\\ud800`); httpx's own encoder cannot.
    return running.post(compat.CALL_PATH, content=json.dumps(body), headers=headers)


def _integrity(running: RunningOwner) -> str:
    conn = sqlite3.connect(running.db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("method", "args", "kwargs", "parameter"),
    [
        ("history", [["todo"], 1], {}, "kind"),
        ("history", [{"todo": 1}, 1], {}, "kind"),
        ("history", ["todo", "one"], {}, "item_id"),
        ("abandon_todo", [1], {"actor": 2**64, "reason": "r"}, "actor"),
        ("abandon_todo", [1], {"actor": "agent", "reason": ["r"]}, "reason"),
        ("take_todo", [2**64], {"actor": "agent"}, "todo_id"),
        ("take_todo", [-(2**70)], {"actor": "agent"}, "todo_id"),
        ("take_todo", [1], {"actor": "agent", "force": "yes"}, "force"),
        ("add_todo", ["lone \ud800 surrogate"], {"actor": "agent"}, "title"),
        ("notify", [3.5], {"actor": "agent"}, "text"),
        ("rows", [], {"limit": 2**80}, "limit"),
    ],
)
def test_arguments_of_the_wrong_type_answer_400_naming_the_parameter(
    running: RunningOwner, method: str, args: list[Any], kwargs: dict[str, Any], parameter: str
) -> None:
    from engine import ledger

    ledger.add_todo("something to act on", actor="agent")

    answer = _call(running, method, args, kwargs)

    assert answer.status_code == 400, answer.text
    detail = answer.json()["detail"]
    assert method in detail
    assert parameter in detail
    assert _integrity(running) == "ok"


def test_a_keep_alive_connection_survives_a_refused_call(running: RunningOwner) -> None:
    headers = {compat.CREDENTIAL_HEADER: running.credential()}
    with running.client(headers=headers) as client:
        for kind in (["todo"], {"a": 1}, "todo"):
            body = {"method": "list_items", "args": [kind], "key": uuid.uuid4().hex}
            answer = client.post(compat.CALL_PATH, json=body)
            assert answer.status_code in (200, 400), answer.text


def test_a_caller_without_the_credential_learns_nothing_about_the_database(
    running: RunningOwner,
) -> None:
    cutover.undo(actor="operator", db=running.db)  # local mode: no credential exists at all
    body = {"method": "list_items", "args": [], "key": uuid.uuid4().hex}

    refused = running.post(compat.CALL_PATH, json=body)
    status = running.get("/status")

    assert refused.status_code == 409
    for answer in (refused, status):
        assert str(running.db) not in answer.text
        assert running.db.name not in answer.text
        assert str(running.home) not in answer.text
