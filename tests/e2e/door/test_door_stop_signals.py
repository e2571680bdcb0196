"""`chief serve` and `chief telegram-emulator` as real processes, stopped while a request is in
flight by a volley of stop signals (honcho forwards one more after Ctrl-C's SIGINT): each
finishes the request in flight and exits 0, however many signals arrive."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from chief.telegram.emulator import parse_fault
from tests.e2e.door.conftest import NOTIFY_URL, Harness, clean_env, spawn_door
from tests.support.door import body, key_headers
from tests.support.procs import socket_client
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(120)

HELD_S = 1.5  # how long the request stays in flight
VOLLEY = (signal.SIGTERM, signal.SIGINT)
SIGNAL_GAP_S = 0.005
MAX_SIGNALS = 4000  # 20 s of signals at most


def _post_in_thread(
    client: httpx.Client, url: str, document: object, answers: list[object]
) -> threading.Thread:
    """POST `document` with `client` (closed after) to `url` in a thread; its answer (or error)
    lands in `answers`."""

    def post() -> None:
        try:
            with client:
                answers.append(client.post(url, json=document, headers=key_headers()))
        except httpx.HTTPError as exc:
            answers.append(exc)

    thread = threading.Thread(target=post, name="in-flight")
    thread.start()
    return thread


def _volley(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGTERM and SIGINT, alternating every few milliseconds, until the process has exited:
    signals land in every phase of the stop, the last moments after the server returned too."""
    for n in range(MAX_SIGNALS):
        if proc.poll() is not None:
            return
        proc.send_signal(VOLLEY[n % len(VOLLEY)])
        time.sleep(SIGNAL_GAP_S)  # the pace of the volley, not a synchronisation


def test_door_stop_signals_finish_the_request_in_flight_and_exit_0(harness: Harness) -> None:
    door = spawn_door(harness.env())
    # The work in flight is the sender's: a Telegram send that takes HELD_S, then its mark.
    harness.emulator.arm(parse_fault({"mode": "delay", "delay_s": HELD_S}))
    answers: list[object] = []
    thread = _post_in_thread(
        socket_client(door.socket_path, timeout_s=30.0), NOTIFY_URL, body("sig-1"), answers
    )
    wait_until_sync(
        lambda: harness.emulator.calls["sendmessage"] >= 1,
        timeout_s=10,
        what="the notify to reach Telegram",
    )
    _volley(door.proc)
    thread.join(30)
    assert door.proc.wait(30) == 0, door.stderr()
    (answer,) = answers
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == 200, answer.text
    # The send in flight finished and was marked: a restart will not ring it again.
    assert harness.emulator.texts() == [body("sig-1")["text"]]
    assert harness.sent_marks("sig-1") == 1
    assert "Traceback" not in door.stderr()


def test_emulator_stop_signals_finish_the_request_in_flight_and_exit_0(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "chief", "telegram-emulator", "--port", "0"],
        env=clean_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        lines.extend(proc.stderr)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        port = wait_until_sync(
            lambda: next(
                (
                    line.split('"port": ')[1].split(",")[0].split("}")[0]
                    for line in lines
                    if "emulator.listening" in line
                ),
                None,
            ),
            timeout_s=20,
            what="the emulator to listen",
        )
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=10.0) as client:
            armed = client.post(
                base + "/emulator/faults", json={"mode": "delay", "delay_s": HELD_S}
            )
            assert armed.status_code == 200
        answers: list[object] = []
        thread = _post_in_thread(
            httpx.Client(timeout=30.0),
            base + "/bot1:x/sendMessage",
            {"chat_id": 1, "text": "held"},
            answers,
        )
        wait_until_sync(lambda: any("emulator.fault_armed" in line for line in lines), timeout_s=5)
        wait_until_sync(lambda: _calls(base) >= 1, timeout_s=10, what="the call in flight")
        _volley(proc)
        thread.join(30)
        assert proc.wait(30) == 0, "".join(lines)
        (answer,) = answers
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 200, answer.text
        assert answer.json()["ok"] is True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        reader.join(10)
        if proc.stderr is not None:
            proc.stderr.close()


def _calls(base: str) -> int:
    with httpx.Client(timeout=5.0) as client:
        return int(client.get(base + "/emulator/calls").json()["calls"].get("sendmessage", 0))
