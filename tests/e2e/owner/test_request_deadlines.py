"""A request's deadline, decided by the ledger (issue 28), on real processes: `coop serve` on a
real coop.db, its embedded notifier daemon posting to a real door (the loopback test door on
real uvicorn), `coop request wait` and the CLI as processes of their own, and the phone's
answer route racing the deadline.

One stack for the module (a folder, the door, one `coop serve`), in this order: local mode
first, then a standalone daemon, then the cutover that puts the ledger in service mode for the
last test. Each deadline is short, given through the flag (`--deadline 2s`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from engine import ledger
from tests.e2e.owner.conftest import ServeProcess, ok
from tests.e2e.owner.test_owner_wait import finish, start_waiter, wait_bound
from tests.e2e.owner.test_phone_endpoints import answer_key, ask_key_of, events, post_answer
from tests.support.loopback_door import TestDoor, serve_door_in_thread
from tests.support.procs import Service, child_env
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.slow  # a stack and real deadlines: started early (tests/conftest.py)

KEY = "door-key-for-deadline-tests"
#: Bound on every wait for the ledger to decide: far above a deadline of 2 s.
DECIDE_S = 30.0
RACE_ROUNDS = 20


class Stack:
    """The module's folder, environment, door and `coop serve`."""

    def __init__(self, folder: Path, door: TestDoor, door_socket: str) -> None:
        self.folder = folder
        self.door = door
        key = folder / "service.key"
        key.write_text(KEY + "\n")
        key.chmod(0o600)
        self.env = {
            "COOP_HOME": str(folder),
            "COOP_DB": str(folder / "coop.db"),
            "COOP_KICK": "datagram",  # the add's kick wakes the daemon; no drainer is spawned
            "COOP_ACTOR": "agent",
            "COOP_OWNER": "owner",
            "COOP_SERVICE_KEY_FILE": str(key),
            "COOP_DOOR_SOCKET": door_socket,
            "COOP_OWNER_FILE": "",
            "COOP_TEST_FAULTS": "",
            "COOP_SESSION": "",
        }
        self.serve = ServeProcess(folder, self.env)

    @property
    def db(self) -> str:
        return self.env["COOP_DB"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    door = TestDoor(key=KEY)
    folder = tmp_path_factory.mktemp("deadlines")
    with serve_door_in_thread(door, folder / "door.sock") as path:
        built = Stack(folder, door, path)
        built.serve.start()
        try:
            yield built
        finally:
            built.serve.stop_quietly()


def _add(stack: Stack, *flags: str, title: str = "pay the plumber") -> int:
    out = ok(stack.env, "request", "add", title, "--to", "owner", *flags)
    return int(out.split("#", 1)[1].split()[0])


def _row(stack: Stack, request_id: int) -> dict[str, Any]:
    with closing(sqlite3.connect(stack.db)) as conn:
        conn.row_factory = sqlite3.Row
        return dict(conn.execute("SELECT * FROM requests WHERE id = ?", (request_id,)).fetchone())


def _decided(stack: Stack, request_id: int) -> dict[str, Any]:
    return wait_until_sync(
        lambda: (row := _row(stack, request_id))["status"] in ("closed", "abandoned") and row,
        timeout_s=DECIDE_S,
        what=f"request #{request_id} decided",
    )


def _closing_events(stack: Stack, request_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    env = {"COOP_DB": stack.db}
    return [(e, a, p or {}) for e, a, p in events(env, request_id) if e in ("close", "abandon")]


def _at_door(stack: Stack, kind: str, request_id: int) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        with stack.door.lock:
            for body in stack.door.received:
                ask = body.get("ask") or body.get("settles") or {}
                if body["kind"] == kind and ask.get("request_id") == request_id:
                    return body
        return None

    return wait_until_sync(found, timeout_s=DECIDE_S, what=f"{kind} of #{request_id} at the door")


def test_a_deadline_with_a_default_closes_once_wakes_the_waiter_and_settles_the_ask(
    stack: Stack,
) -> None:
    request_id = _add(
        stack, "--choices", "approve,decline", "--deadline", "2s", "--default", "DECLINE"
    )
    waiter = start_waiter(stack.env, str(request_id))
    wait_bound(stack.env, 1)

    status, out, err = finish(waiter)

    assert (status, err) == (0, "")
    clock = time.strftime("%H:%M", time.localtime(_row(stack, request_id)["deadline_at"]))
    assert out.strip() == (
        f"request #{request_id} closed by its deadline ({clock}), with no answer: decline"
    )
    row = _row(stack, request_id)
    assert (row["status"], row["closed_by"], row["result_summary"]) == (
        "closed",
        "deadline",
        "decline",
    )
    [(event, actor, said)] = _closing_events(stack, request_id)
    assert (event, actor, said["via"], said["choice"]) == (
        "close",
        "deadline",
        "deadline",
        "decline",
    )
    assert 0 <= said["late_s"] < DECIDE_S
    key = ask_key_of({"COOP_DB": stack.db}, request_id)
    asked = _at_door(stack, "request_added", request_id)
    assert asked["ask"]["deadline_at"] == row["deadline_at"]
    assert asked["ask"]["default"] == "decline"
    assert "urgent" not in asked
    assert "remind" not in asked["ask"]
    settled = _at_door(stack, "request_closed", request_id)
    assert settled["settles"] == {
        "request_id": request_id,
        "key": key,
        "by": "deadline",
        "outcome": "closed",
        "choice": "decline",
    }
    assert "ring" not in settled
    assert settled["text"] == (
        f'request #{request_id} "pay the plumber": no answer by its deadline ({clock}),'
        " so closed with: decline"
    )


def test_without_a_default_the_deadline_abandons_the_request(stack: Stack) -> None:
    request_id = _add(stack, "--choices", "approve,decline", "--deadline", "1s", "--urgent")

    row = _decided(stack, request_id)

    assert (row["status"], row["closed_by"], row["result_summary"]) == (
        "abandoned",
        "deadline",
        None,
    )
    [(event, actor, said)] = _closing_events(stack, request_id)
    assert (event, actor, said["via"]) == ("abandon", "deadline", "deadline")
    assert "choice" not in said
    assert _at_door(stack, "request_added", request_id)["urgent"] is True
    settled = _at_door(stack, "request_abandoned", request_id)["settles"]
    assert (settled["by"], settled["outcome"]) == ("deadline", "abandoned")
    assert "choice" not in settled


def test_a_tap_racing_the_deadline_closes_each_request_exactly_once(stack: Stack) -> None:
    """Each round: one request, its deadline (1 s) and the owner's tap sent at that same instant
    (a few ms either side, round by round), through the phone's answer route on `coop serve`.
    The two serialise on BEGIN IMMEDIATE: one close, and the loser is told."""
    ids = [
        ledger.add_request(
            f"race {n}", actor="agent", addressed_to="owner", choices="approve,decline",
            deadline="2s", default="decline", db=stack.db,
        )["request"]["id"]
        for n in range(RACE_ROUNDS)
    ]  # fmt: skip
    answers: dict[int, dict[str, Any]] = {}
    bodies = {
        request_id: {
            "answer_key": answer_key(),
            "request_id": request_id,
            "ask_key": ask_key_of({"COOP_DB": stack.db}, request_id),
            "choice": "approve",
        }
        for request_id in ids
    }
    deadlines = {request_id: _row(stack, request_id)["deadline_at"] for request_id in ids}

    def tap(n: int, request_id: int) -> None:
        # Sent from 0 to 45 ms ahead of the deadline, round by round: the route takes a few ms
        # to reach its commit (a connection, the guard, the ledger opened), so the two commits
        # meet in the same instant in some rounds, either one first.
        time.sleep(max(0.0, deadlines[request_id] - 0.005 * (n % 10) - time.time()))
        answers[request_id] = post_answer(stack.serve, stack.env, bodies[request_id]).json()

    threads = [threading.Thread(target=tap, args=pair) for pair in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DECIDE_S)

    for request_id in ids:
        row = _decided(stack, request_id)
        closes = _closing_events(stack, request_id)
        assert len(closes) == 1, (request_id, closes)
        answer = answers[request_id]
        if answer["outcome"] == "closed":  # the tap committed first
            assert (row["closed_by"], row["result_summary"]) == ("owner", "approve")
            assert closes[0][2]["via"] == "telegram"
        else:  # the deadline committed first, and the tap is told what it decided
            assert answer["outcome"] == "already_closed"
            assert (row["closed_by"], row["result_summary"]) == ("deadline", "decline")
            assert answer["detail"].startswith(
                f"request #{request_id} was already closed by its deadline"
            )
            assert answer["detail"].endswith("with no answer: decline")
    won = sum(answers[i]["outcome"] == "closed" for i in ids)
    print(f"taps first: {won} of {RACE_ROUNDS}; the deadline first: {RACE_ROUNDS - won}")


def test_a_deadline_filed_with_no_row_to_send_still_wakes_the_sleeping_daemon(
    stack: Stack,
) -> None:
    """A request to anyone queues no row when filed, yet its add kicks the daemon (asleep up
    to its 300 s backstop, no other deadline open), which then sleeps until this deadline."""
    out = ok(stack.env, "request", "add", "anyone?", "--deadline", "1s")
    request_id = int(out.split("#", 1)[1].split()[0])

    row = _decided(stack, request_id)

    assert (row["status"], row["closed_by"]) == ("abandoned", "deadline")
    assert row["reason"].startswith("no answer by its deadline (")


def test_notify_urgent_reaches_the_door_with_urgent_true(stack: Stack) -> None:
    ok(stack.env, "notify", "--urgent", "the freezer is warm")

    def urgent() -> dict[str, Any] | None:
        with stack.door.lock:
            return next(
                (b for b in stack.door.received if b["text"] == "the freezer is warm"), None
            )

    body = wait_until_sync(urgent, timeout_s=DECIDE_S, what="the urgent report at the door")
    assert body["urgent"] is True
    assert set(body) == {"text", "kind", "outbox_id", "urgent"}


def _deadline_passes_while_down(stack: Stack, daemon: Service, *, again: bool) -> None:
    """With the daemon stopped, file a deadline of 1 s, let it pass, start the daemon: applied
    at once, once, with its lateness in the event (`again`: and not again at the next start)."""
    if daemon.running:
        daemon.terminate()
    request_id = _add(stack, "--deadline", "1s")
    deadline_at = _row(stack, request_id)["deadline_at"]
    wait_until_sync(lambda: time.time() > deadline_at + 1.0, timeout_s=DECIDE_S, what="past it")
    assert _row(stack, request_id)["status"] == "open"

    daemon.start()

    row = _decided(stack, request_id)
    assert (row["status"], row["closed_by"]) == ("abandoned", "deadline")
    [(_, _, said)] = _closing_events(stack, request_id)
    assert said["late_s"] >= 1.0
    if again:  # a second start finds it decided, and decides nothing again
        daemon.terminate()
        daemon.start()
        ok(stack.env, "request", "show", str(request_id))
        assert len(_closing_events(stack, request_id)) == 1


def test_a_deadline_passed_while_coop_serve_was_down_is_applied_once_at_its_start(
    stack: Stack,
) -> None:
    _deadline_passes_while_down(stack, stack.serve, again=True)


def test_a_standalone_daemon_applies_deadlines_too(stack: Stack) -> None:
    daemon = Service(
        "notifier",
        ["notifier", "run"],
        stack.folder,
        "notifier.daemon.started",
        child_env(stack.env),
        takes_port=False,
    )
    stack.serve.terminate()
    try:
        _deadline_passes_while_down(stack, daemon, again=False)
        request_id = _add(stack, "--choices", "yes,no", "--deadline", "1s", "--default", "no")
        assert _decided(stack, request_id)["result_summary"] == "no"
    finally:
        if daemon.running:
            daemon.terminate()
        stack.serve.start()


def test_after_a_cutover_coop_serve_applies_the_deadline_through_the_fence(stack: Stack) -> None:
    ok(stack.env, "cutover")
    request_id = _add(
        stack, "--choices", "approve,decline", "--deadline", "1s", "--default", "approve"
    )
    waiter = start_waiter(stack.env, str(request_id))

    status, out, _ = finish(waiter)

    assert status == 0
    assert "by its deadline" in out
    assert out.strip().endswith("with no answer: approve")
    [(event, actor, said)] = _closing_events(stack, request_id)
    assert (event, actor, said["via"]) == ("close", "deadline", "deadline")
    assert _at_door(stack, "request_closed", request_id)["settles"]["choice"] == "approve"
    # The service's own connection passed the fence: a direct writer still may not.
    with closing(sqlite3.connect(stack.db)) as conn, pytest.raises(sqlite3.DatabaseError):
        conn.execute("UPDATE requests SET title = 'x' WHERE id = ?", (request_id,))
    assert (
        json.loads(ok(stack.env, "request", "show", str(request_id), "--json"))["request"][
            "closed_by"
        ]
        == "deadline"
    )
