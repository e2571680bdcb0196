"""`coop serve` as a real process: however many stop signals arrive, the compat call in flight
finishes and the service exits 0; an error at start is one line and a non-zero exit, never a
traceback; a second `coop serve` on a ledger one already serves refuses in one line naming the
first one's pid, before it listens."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import pytest

from engine.owner import compat
from tests.e2e.owner.conftest import STOP_TIMEOUT_S, ServeProcess, ok
from tests.support.procs import child_env
from tests.support.waiting import wait_until_sync


def _events(serve: ServeProcess, name: str) -> list[dict]:
    found = []
    for line in serve.log().splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == name:
                found.append(event)
    return found


def _serve_once(env: dict[str, str], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", "serve"],
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _credential(db: Path) -> str:
    config = json.loads(Path(str(db) + ".owner.json").read_text())
    return Path(config["credential_file"]).read_text().strip()


@pytest.mark.parametrize(
    "stops",
    [
        (signal.SIGTERM, signal.SIGTERM),
        (signal.SIGINT, signal.SIGTERM, signal.SIGINT, signal.SIGTERM),
    ],
    ids=["sigterm-twice", "four-mixed"],
)
def test_every_stop_signal_lets_the_call_in_flight_finish_and_exit_zero(
    tmp_path: Path, stack_env: dict[str, str], stops: tuple[signal.Signals, ...]
) -> None:
    hold = tmp_path / "hold-the-call"
    env = {**stack_env, "COOP_TEST_FAULTS": f"engine.owner.before_call:pause-while={hold}"}
    serve = ServeProcess(tmp_path, env).start()
    try:
        ok(stack_env, "cutover")
        hold.touch()
        answers: list[httpx.Response] = []
        body = {
            "method": "add_todo",
            "args": ["finish me"],
            "kwargs": {"actor": "agent"},
            "key": uuid.uuid4().hex,
        }
        headers = {compat.CREDENTIAL_HEADER: _credential(tmp_path / "coop.db")}
        caller = threading.Thread(
            target=lambda: answers.append(
                serve.post(compat.CALL_PATH, json=body, headers=headers, timeout=30)
            )
        )
        caller.start()
        wait_until_sync(Path(str(hold) + ".reached").exists, what="the call in flight")

        assert serve.proc is not None
        for number, signum in enumerate(stops, start=1):
            serve.proc.send_signal(signum)
            wait_until_sync(
                lambda n=number: (
                    len(_events(serve, "service.stopping"))
                    + len(_events(serve, "service.stop_signal_noted"))
                    >= n
                ),
                what=f"stop signal {number} noted",
            )
        assert serve.proc.poll() is None, "a stop signal killed the service"
        hold.unlink()  # let the call go on

        caller.join(timeout=STOP_TIMEOUT_S)
        returncode = serve.proc.wait(timeout=STOP_TIMEOUT_S)
    finally:
        hold.unlink(missing_ok=True)
        serve.stop_quietly()

    assert returncode == 0, serve.log()
    assert [answer.status_code for answer in answers] == [200]
    assert answers[0].json()["outcome"] == "committed"
    assert len(_events(serve, "service.stop_signal_noted")) == len(stops) - 1
    assert _events(serve, "service.stopped")
    assert "Traceback" not in serve.log()


def _assert_one_line_refusal(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "ExceptionGroup" not in done.stderr
    plain = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(plain) == 1, done.stderr
    assert plain[0].startswith("coop serve: ")
    assert words in plain[0], plain


def test_a_taken_metrics_port_is_one_line_and_a_non_zero_exit(
    stack_env: dict[str, str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]

        done = _serve_once({**stack_env, "COOP_METRICS_PORT": str(port)})

    _assert_one_line_refusal(done, f"cannot listen on 127.0.0.1:{port} (COOP_METRICS_PORT)")


def test_a_socket_another_process_answers_on_is_one_line_and_never_taken_over(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    path = tmp_path / "service.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(path))
        live.listen(1)

        done = _serve_once(stack_env)

        _assert_one_line_refusal(done, f"another process already answers at {path}")
        assert path.exists()


def test_a_socket_in_a_folder_others_can_write_is_one_line(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # the umask may have taken bits away

    done = _serve_once({**stack_env, "COOP_SERVICE_SOCKET": str(shared / "service.sock")})

    _assert_one_line_refusal(done, f"cannot listen on {shared / 'service.sock'}")
    assert not (shared / "service.sock").exists()


def test_an_unusable_data_folder_is_one_line_and_a_non_zero_exit(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a folder")

    done = _serve_once({**stack_env, "COOP_DB": str(in_the_way / "coop.db")})

    _assert_one_line_refusal(done, "cannot open the Coop database")


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("COOP_METRICS_PORT", "eighty", "COOP_METRICS_PORT"),
        ("COOP_METRICS_PORT", "70000", "COOP_METRICS_PORT"),
        ("COOP_SERVICE_SOCKET", "relative/service.sock", "COOP_SERVICE_SOCKET"),
        # The TCP era's settings: each refused, naming what to set instead.
        ("COOP_SERVICE_PORT", "8764", "set COOP_METRICS_PORT"),
        ("COOP_SERVICE_HOST", "127.0.0.1", "COOP_SERVICE_SOCKET"),
        ("COOP_SERVICE_URL", "http://127.0.0.1:8764", "set COOP_SERVICE_SOCKET"),
        ("COOP_SERVICE_KEY_FILE", "/nonexistent/service.key", "COOP_SERVICE_KEY_FILE"),
        ("COOP_CLIENT_TIMEOUT_S", "-1", "COOP_CLIENT_TIMEOUT_S"),
    ],
)
def test_a_wrong_setting_is_one_line_naming_it(
    stack_env: dict[str, str], setting: str, value: str, words: str
) -> None:
    done = _serve_once({**stack_env, setting: value})

    _assert_one_line_refusal(done, words)


def test_a_second_coop_serve_on_one_ledger_refuses_naming_the_first_ones_pid(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    first = ServeProcess(tmp_path, stack_env).start()
    try:
        first.wait_event("notifier.daemon.started")
        # Another data folder (so another socket), the same coop.db (COOP_DB): the same ledger.
        (tmp_path / "second").mkdir(mode=0o700)
        done = _serve_once({**stack_env, "COOP_HOME": str(tmp_path / "second")})

        _assert_one_line_refusal(done, f"(pid {first.pid}) already serves")
        # Refused before it listened, opened a kick socket or ran a daemon.
        assert "service.listening" not in done.stderr
        assert "notifier.daemon.started" not in done.stderr
        status = first.get("/status", timeout=10)
        assert status.status_code == 200
        assert status.json()["daemon"] is True
        assert first.terminate() == 0
    finally:
        first.stop_quietly()


def test_the_door_refuses_the_tcp_eras_service_url_in_one_line(
    tmp_path: Path, stack_env: dict[str, str]
) -> None:
    """`chief serve`, the client of `coop serve` on the phone's side: an install that still
    names the service's TCP URL stops at start, saying what to set instead."""
    env = {**child_env(stack_env), "COOP_SERVICE_URL": "http://127.0.0.1:8764", "CHIEF_OWNER": "o"}
    done = subprocess.run(
        [sys.executable, "-m", "chief", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("chief serve:")]
    assert len(said) == 1, done.stderr
    assert "COOP_SERVICE_URL is no longer read" in said[0]
    assert "set COOP_SERVICE_SOCKET" in said[0]
