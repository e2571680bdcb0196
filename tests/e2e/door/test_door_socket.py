"""The door on its Unix socket, with real processes: a notify reaches the Chief through it end to
end; the settings that named a TCP door are refused in one line by every process that read
them; a socket in a folder another user can write is refused by the clients (nothing sent) and
by the door; `/metrics` alone is served on TCP, keyless, and nothing else is there."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.e2e.door.conftest import Harness, spawn_door
from tests.support.door import key_headers

COMMAND_TIMEOUT_S = 60.0


def run(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def outbox_states(folder: Path) -> list[str]:
    with sqlite3.connect(folder / "coop.db") as conn:
        return [state for (state,) in conn.execute("SELECT state FROM coop_outbox ORDER BY id")]


def chief_lines_saying(folder: Path, words: str) -> int:
    with sqlite3.connect(folder / "chief.db") as conn:
        query = "SELECT COUNT(*) FROM messages WHERE content LIKE ?"
        return int(conn.execute(query, (f"%{words}%",)).fetchone()[0])


def test_a_notify_reaches_the_chief_through_the_socket(harness: Harness) -> None:
    door = spawn_door(harness.env())
    path = Path(door.socket_path)
    assert path == harness.folder / "door.sock"
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    env = harness.env(COOP_ACTOR="builder", COOP_KICK="off")
    assert run("engine", "notify", "over the socket", env=env).returncode == 0
    drained = run("notifier", "drain", "--no-wait", env=env)
    assert drained.returncode == 0, drained.stderr
    assert outbox_states(harness.folder) == ["delivered"]
    assert chief_lines_saying(harness.folder, "over the socket") == 1
    status = run("engine", "status", env=env)
    assert f"door: answering at {path}" in status.stdout, status.stdout
    reported = run("chief", "report", "--source", "cron:sock", "landed by the door", env=env)
    assert reported.returncode == 0, reported.stderr
    assert "by the running door" in reported.stdout
    assert door.terminate() == 0
    assert not path.exists()  # removed on the way out


RETIRED = {
    "COOP_DOOR_URL": "http://127.0.0.1:8765/api/coop/engine/notify",
    "CHIEF_PORT": "8765",
    "CHIEF_HOST": "127.0.0.1",
}
COMMANDS = {
    "chief serve": ("chief", "serve"),
    "the notifier": ("notifier", "drain", "--no-wait"),
    "coop status": ("engine", "status"),
    "chief report": ("chief", "report", "--source", "cron:old", "text"),
}


@pytest.mark.parametrize("setting", sorted(RETIRED))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_retired_setting_is_refused_in_one_line(
    harness: Harness, setting: str, command: str
) -> None:
    env = harness.env(COOP_ACTOR="builder", COOP_KICK="off", **{setting: RETIRED[setting]})
    done = run(*COMMANDS[command], env=env)
    assert done.returncode != 0, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{setting} is no longer read" in done.stderr
    assert "COOP_DOOR_SOCKET" in done.stderr or "unset CHIEF_HOST" in done.stderr
    assert not (harness.folder / "door.sock").exists()


class Recorder:
    """A listener on a Unix socket that records every byte it is sent."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.received = bytearray()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    while data := conn.recv(65536):
                        self.received += data
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def test_a_socket_in_a_folder_others_can_write_is_refused(harness: Harness) -> None:
    shared = harness.folder / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # noqa: S103 - the point: a folder anyone can write
    path = shared / "door.sock"
    recorder = Recorder(path)
    try:
        env = harness.env(COOP_ACTOR="builder", COOP_KICK="off", COOP_DOOR_SOCKET=str(path))
        assert run("engine", "notify", "must not leave", env=env).returncode == 0
        drained = run("notifier", "drain", "--no-wait", env=env)
        status = run("engine", "status", env=env)
        served = run("chief", "serve", env=env)
    finally:
        recorder.close()
    assert bytes(recorder.received) == b""
    assert outbox_states(harness.folder) == ["pending"]
    assert "with mode 0777; a service's socket must be in a folder" in drained.stderr
    door_line = [line for line in status.stdout.splitlines() if line.startswith("door:")]
    assert len(door_line) == 1, status.stdout
    assert "nothing was sent" in door_line[0], status.stdout
    assert served.returncode == 1
    assert len(served.stderr.strip().splitlines()) == 1, served.stderr
    assert "chmod 700" in served.stderr


def test_only_metrics_is_served_on_tcp_and_without_a_key(harness: Harness) -> None:
    door = spawn_door(harness.env(CHIEF_METRICS_PORT="0"))
    port = int(door.wait_event("door.metrics_listening")["port"])
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(timeout=10.0, trust_env=False) as client:
        scraped = client.get(base + "/metrics")
        assert scraped.status_code == 200, scraped.text
        assert "coop_door_requests_total" in scraped.text
        assert client.post(base + "/metrics").status_code == 405
        assert client.delete(base + "/metrics").status_code == 405
        for path in (
            "/api/coop/engine/notify",
            "/api/coop/engine/notify-batch",
            "/api/coop/engine/status",
            "/api/chief/report",
            "/docs",
            "/",
        ):
            for method in ("GET", "POST"):
                answer = client.request(method, base + path, headers=key_headers(), json={})
                assert answer.status_code == 404, (method, path, answer.status_code)
        browser = client.get(base + "/metrics", headers={"Origin": "http://evil.example"})
        assert browser.status_code == 403
        rebound = client.get(base + "/metrics", headers={"Host": "evil.example"})
        assert rebound.status_code == 403
