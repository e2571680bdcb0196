"""The compatibility client against the owner's real endpoint on loopback: every outcome, its
receipt, and the words."""

from __future__ import annotations

import socketserver
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from engine import ledger, outbox
from engine.errors import LifecycleError, NotFound, OwnerUnavailable, UsageError
from engine.owner import compat, receipts
from tests.integration.owner.conftest import RunningOwner


def _raw_count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _states() -> list[str]:
    return [r["state"] for r in receipts.all_receipts()]


def test_routed_verbs_run_on_the_owner_and_settle_committed(running: RunningOwner) -> None:
    added = ledger.add_todo("write the report", actor="agent")
    ledger.take_todo(added["todo"]["id"], actor="agent")
    done = ledger.done_todo(added["todo"]["id"], actor="agent", result_summary="sent")
    request = ledger.add_request("review it", actor="agent", addressed_to="reviewer")
    closed = ledger.close_request(request["request"]["id"], actor="reviewer")
    note = outbox.notify("hello", actor="agent")

    assert done["todo"]["status"] == "done"
    assert closed["request"]["status"] == "closed"
    assert [item["status"] for item in ledger.list_items(include_closed=True)] == [
        "done",
        "closed",
    ]
    assert [e["event"] for e in ledger.history("todo", 1)] == ["add", "take", "done"]
    listed = outbox.rows()
    assert [row["id"] for row in listed] == [note["outbox_id"], 2, 1]
    # Each row the owner wrote carries its own delivery key, the door's outbox_id.
    keys = [row["delivery_key"] for row in listed]
    assert len(set(keys)) == 3
    assert all(key.startswith("d-") for key in keys), keys
    assert _states() == ["committed"] * 9
    assert _raw_count(running.db, "coop_commands") == 9
    # One in-process kick per committed call that queued an outbox row.
    assert len(running.kicks) == 3


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (
            lambda: ledger.take_todo(99, actor="reviewer"),
            NotFound,
            "todo #99 does not exist — `coop list --all` shows the ids",
        ),
        (
            lambda: ledger.add_todo("  ", actor="reviewer"),
            UsageError,
            None,
        ),
        (
            lambda: ledger.done_todo(1, actor="reviewer"),
            LifecycleError,
            None,
        ),
    ],
    ids=["not-found", "usage", "lifecycle"],
)
def test_a_domain_refusal_reraises_the_same_type_and_words(
    running: RunningOwner, call, error: type[Exception], words: str | None
) -> None:
    ledger.add_todo("write the report", actor="agent")
    ledger.take_todo(1, actor="agent")
    running.owner_file.rename(running.home / "aside.json")
    try:
        with pytest.raises(error) as local:  # the same call run locally, for its exact words
            call()
    finally:
        (running.home / "aside.json").rename(running.owner_file)
    events_before = _raw_count(running.db, "coop_events")

    with pytest.raises(error) as remote:
        call()

    assert type(remote.value) is type(local.value)
    assert str(remote.value) == (words or str(local.value))
    assert receipts.all_receipts()[-1]["state"] == "rejected"
    assert _raw_count(running.db, "coop_events") == events_before


def _call_body(key: str, title: str) -> dict:
    args, kwargs = [title], {"actor": "agent"}
    return {
        "method": "add_todo",
        "args": args,
        "kwargs": kwargs,
        "key": key,
        "input_sha256": compat.input_digest("add_todo", args, kwargs),
        "metadata": {},
    }


def test_the_same_request_key_sent_twice_runs_once(running: RunningOwner) -> None:
    url = compat.CALL_PATH
    first = running.post(url, json=_call_body("k" * 16, "once"), headers=_auth(running))
    second = running.post(url, json=_call_body("k" * 16, "once"), headers=_auth(running))
    other = running.post(url, json=_call_body("k" * 16, "another"), headers=_auth(running))

    assert first.status_code == second.status_code == 200
    assert (first.json()["replayed"], second.json()["replayed"]) == (False, True)
    assert second.json()["result"] == first.json()["result"]
    assert other.status_code == 409
    assert "already filed for another input" in other.json()["detail"]
    assert _raw_count(running.db, "todos") == 1


def _auth(running: RunningOwner) -> dict[str, str]:
    return {compat.CREDENTIAL_HEADER: running.credential()}


def test_a_4xx_without_verdict_settles_rejected(running: RunningOwner) -> None:
    with pytest.raises(OwnerUnavailable) as caught:
        compat.remote("add_todo", ["x"], {"actor": "agent", "colour": "red"}, running.config())

    assert str(caught.value) == (
        "Coop refused the request (HTTP 400): add_todo: got an unexpected keyword argument 'colour'"
    )
    assert _states() == ["rejected"]
    assert _raw_count(running.db, "todos") == 0


def test_a_wrong_credential_is_refused_and_settles_rejected(running: RunningOwner) -> None:
    wrong = running.home / "wrong.key"
    wrong.write_text("not-the-key\n")
    wrong.chmod(0o600)
    config = {**running.config(), "credential_file": str(wrong)}

    with pytest.raises(OwnerUnavailable) as caught:
        compat.remote("add_todo", ["x"], {"actor": "agent"}, config)

    assert str(caught.value) == (
        "Coop refused the request (HTTP 401): missing or wrong Coop owner credential"
    )
    assert _states() == ["rejected"]
    assert _raw_count(running.db, "todos") == 0


class _Failing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class _UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@pytest.fixture
def failing_owner(home: Path) -> Iterator[str]:
    """A stand-in owner that answers every call with a bare 500 (an outside party's fault), on
    a socket of this user's in the test's private folder."""
    path = str(home / "failing.sock")
    server = _UnixHTTPServer(path, _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_5xx_keeps_the_receipt_uncertain(running: RunningOwner, failing_owner: str) -> None:
    config = {**running.config(), "socket": failing_owner}

    with pytest.raises(OwnerUnavailable) as caught:
        compat.remote("add_todo", ["x"], {"actor": "agent"}, config)

    (receipt,) = receipts.all_receipts()
    assert str(caught.value) == f"Coop owner failed (HTTP 500); reconcile request {receipt['key']}"
    assert receipt["state"] == "uncertain"


def test_an_owner_that_is_not_running_fails_closed_and_sends_nothing(
    running: RunningOwner,
) -> None:
    ledger.add_todo("before the outage", actor="agent")
    receipts_before = receipts.all_receipts()
    closed = running.config()
    closed["socket"] = str(running.home / "nothing-listens.sock")

    with pytest.raises(OwnerUnavailable) as caught:
        compat.remote("add_todo", ["during the outage"], {"actor": "agent"}, closed)

    assert str(caught.value) == (
        f"Coop owner unavailable: coop serve is not running (nothing listens at "
        f"{closed['socket']}); nothing was sent"
    )
    # Nothing crossed: no receipt to reconcile, nothing written.
    assert receipts.all_receipts() == receipts_before
    assert _raw_count(running.db, "todos") == 1


def test_reconcile_settles_a_committed_key_and_a_key_that_never_arrived(
    running: RunningOwner,
) -> None:
    body = _call_body("c" * 16, "sent but the answer was lost")
    receipts.create(body["key"], "add_todo", body["input_sha256"], str(running.db))
    receipts.create("n" * 16, "add_todo", "00", str(running.db))
    assert running.post(compat.CALL_PATH, json=body, headers=_auth(running)).is_success

    committed = compat.reconcile("c" * 16, running.config())
    never = compat.reconcile("n" * 16, running.config())

    assert committed["outcome"] == "committed"
    assert committed["receipt"]["state"] == "committed"
    assert never["outcome"] == "never_arrived"
    assert never["receipt"]["state"] == "rejected"
    assert receipts.uncertain() == []
    late = running.post(compat.CALL_PATH, json=_call_body("n" * 16, "late"), headers=_auth(running))
    assert late.status_code == 409
    assert _raw_count(running.db, "todos") == 1
