"""Owner service cost: the same `ledger.add_todo` called in-process, locally and routed through a
real `coop serve` (http.client on its Unix socket, receipt fsync'd, command filed with the
change), and cold `coop todo add` processes both ways. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_owner.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _figures(label: str, samples_s: list[float]) -> None:
    ordered = sorted(samples_s)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    rate = len(ordered) / sum(ordered)
    print(f"{label:<34} {rate:8.0f} calls/s  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")


def _time_calls(n: int) -> list[float]:
    from engine import ledger

    samples = []
    for i in range(n):
        start = time.perf_counter()
        ledger.add_todo(f"bench {i}", actor="bench")
        samples.append(time.perf_counter() - start)
    return samples


def _cold(n: int, env: dict[str, str]) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "engine", "todo", "add", f"cold {i}"],
            env=env,
            check=True,
            capture_output=True,
        )
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cold", type=int, default=10)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="coop-bench-owner-"))
    key = home / "service.key"
    key.write_text("bench\n")
    key.chmod(0o600)
    env = dict(
        os.environ,
        COOP_HOME=str(home),
        COOP_DB=str(home / "coop.db"),
        COOP_KICK="off",
        COOP_ACTOR="bench",
        COOP_METRICS_PORT="off",
        COOP_SERVICE_KEY_FILE=str(key),
        COOP_DOOR_SOCKET=str(home / "door.sock"),  # no door there: its rows wait, not measured
        COOP_BACKOFF_BASE_S="300",
        PYTHONPATH=str(ROOT),
    )
    os.environ.update(env)
    _figures("in-process, local mode", _time_calls(args.calls))
    _figures("cold `coop todo add`, local mode", _cold(args.cold, env))
    log = home / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "serve"], env=env, stderr=out)
    try:
        deadline = time.monotonic() + 20
        path = None
        while path is None and time.monotonic() < deadline:
            for line in log.read_text().splitlines():
                if '"service.listening"' in line:
                    path = json.loads(line)["socket"]
            time.sleep(0.05)
        assert path, log.read_text()
        subprocess.run(
            [sys.executable, "-m", "engine", "cutover", "--socket", path], env=env, check=True
        )
        _figures("in-process, routed to coop serve", _time_calls(args.calls))
        _figures("cold `coop todo add`, routed", _cold(args.cold, env))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()
