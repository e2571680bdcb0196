"""`coop serve` keeps one thing on TCP: Prometheus's `GET /metrics`, keyless, on 127.0.0.1 at
`COOP_METRICS_PORT`. Nothing else is there (no route that changes anything, no `/status`, no
phone route), and with `COOP_METRICS_PORT=off` the process listens on no TCP port at all:
everything else is on its Unix socket."""

from __future__ import annotations

from pathlib import Path

import httpx

from engine.owner import compat, phone
from tests.e2e.owner.conftest import ServeProcess
from tests.support.procs import fd_targets

TIMEOUT_S = 10.0
#: Every route of the service's app, each as a client of the socket sends it.
APP_ROUTES = [
    ("POST", compat.CALL_PATH),
    ("POST", compat.RECONCILE_PATH),
    ("GET", "/status"),
    ("GET", phone.SUMMARY_PATH),
    ("POST", phone.ANSWER_PATH),
]


def _tcp_listening_inodes() -> set[str]:
    """The socket inodes in LISTEN state (state 0A) in /proc/net/tcp and tcp6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                found.add(fields[9])
    return found


def _tcp_listeners_of(pid: int) -> int:
    mine = {
        target[len("socket:[") : -1] for target in fd_targets(pid) if target.startswith("socket:[")
    }
    return len(mine & _tcp_listening_inodes())


def test_metrics_alone_is_on_tcp_without_a_key(tmp_path: Path, stack_env: dict[str, str]) -> None:
    serve = ServeProcess(tmp_path, stack_env).start()
    try:
        assert serve.socket_path == str(tmp_path / "service.sock")
        assert serve.metrics_url.startswith("http://127.0.0.1:")
        assert _tcp_listeners_of(serve.pid) == 1
        with httpx.Client(base_url=serve.metrics_url, timeout=TIMEOUT_S, trust_env=False) as tcp:
            scraped = tcp.get("/metrics")
            assert scraped.status_code == 200, scraped.text
            assert "coop_outbox_rows" in scraped.text
            for method, path in APP_ROUTES:
                answer = tcp.request(method, path, json={}, headers={"X-Coop-Owner-Key": "x"})
                assert answer.status_code in (404, 405), (method, path, answer.status_code)
            assert tcp.get("/metrics", headers={"Origin": "http://evil.example"}).status_code == 403
        # The app's routes are on the socket, and /metrics is not.
        assert serve.get("/status").status_code == 200
        assert serve.get("/metrics").status_code == 404
    finally:
        serve.stop_quietly()


def test_metrics_off_listens_on_no_tcp_port(tmp_path: Path, stack_env: dict[str, str]) -> None:
    serve = ServeProcess(tmp_path, {**stack_env, "COOP_METRICS_PORT": "off"}).start()
    try:
        assert serve.metrics_url == ""
        assert _tcp_listeners_of(serve.pid) == 0
        assert serve.get("/status").json()["mode"] == "local"
    finally:
        assert serve.terminate() == 0
    assert not (tmp_path / "service.sock").exists(), "the socket outlived its service"
