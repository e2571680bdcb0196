"""`coop request wait` woken by a close: how long from the close to the waiter's line.

Each round adds a request, starts a real `coop request wait N` process (the console script a
user runs), waits until it has bound its socket and sleeps (blocked on it), then closes the
request from this process (`engine.ledger.close_request`: the commit, its fsync, then the
wake) and reads the waiter's line. Printed: p50 and p99 of close called → line read (the
commit included), of close returned → line read (the wake alone), and of the close call
itself; locally, then (unless `--local-only`) routed after a `coop cutover` to a real
`coop serve`, where the close is the owner's commit and its own wake.

    .venv/bin/python bench/bench_wait.py [--rounds 50] [--local-only]

Prints figures; asserts nothing. Every wait is bounded; the processes are stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import percentile, run, wait_for

from engine import kick, ledger  # benchkit put the repository on the path
from engine.owner import cutover
from tests.support.procs import Service, child_env, write_key

ROUND_TIMEOUT_S = 30.0
#: The console script's body (`.venv/bin/coop`).
CONSOLE_SCRIPT = "import sys\nfrom engine.cli import main\nsys.exit(main())\n"
WAIT = [sys.executable, "-c", CONSOLE_SCRIPT, "request", "wait"]


def _sleeping(pid: int) -> bool:
    """The process sleeps (state S): after its bind and its look, it blocks on the socket."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0] == "S"


def _round(db: str, env: dict[str, str], number: int) -> tuple[float, float, float]:
    """One close → waiter's line: (called → line, returned → line, the close call), seconds."""
    request_id = ledger.add_request(f"bench {number}", actor="bench")["request"]["id"]
    waiter = subprocess.Popen(
        [*WAIT, str(request_id), "--timeout", str(ROUND_TIMEOUT_S)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        folder = kick.waiters_folder(db)
        wait_for(
            lambda: os.path.isdir(folder) and os.listdir(folder) and _sleeping(waiter.pid),
            ROUND_TIMEOUT_S,
            "the waiter to bind its socket and block",
        )
        called = time.monotonic()
        ledger.close_request(request_id, actor="bench", result_summary="ok")
        returned = time.monotonic()
        assert waiter.stdout is not None
        line = waiter.stdout.readline()
        read = time.monotonic()
        assert line.startswith(f"request #{request_id} closed"), line
    finally:
        try:
            waiter.wait(ROUND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            waiter.kill()
            waiter.wait()
    return read - called, read - returned, returned - called


def _measure(label: str, db: str, env: dict[str, str], rounds: int) -> None:
    samples = [_round(db, env, number) for number in range(rounds)]
    for index, what in enumerate(("close called -> line", "close returned -> line", "close")):
        values = [each[index] * 1000 for each in samples]
        print(
            f"{label:<7} {what:<24} p50 {percentile(values, 50):7.2f} ms"
            f"  p99 {percentile(values, 99):7.2f} ms  ({rounds} rounds)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--local-only", action="store_true")
    args = parser.parse_args()
    # A short folder: the waiters' folder then sits beside the store, as on a real install.
    folder = Path(tempfile.mkdtemp(prefix="bw"))
    db = str(folder / "coop.db")
    settings = {"COOP_HOME": str(folder), "COOP_DB": db, "COOP_KICK": "off"}
    os.environ.update(settings)
    env = child_env(settings)
    print(f"waiters' folder: {kick.waiters_folder(db)}")
    try:
        _measure("local", db, env, args.rounds)
        if not args.local_only:
            _routed(folder, db, settings, env, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _routed(
    folder: Path, db: str, settings: dict[str, str], env: dict[str, str], rounds: int
) -> None:
    # The embedded notifier needs the door's key to start; no door listens at its socket
    # (<folder>/door.sock): its rows wait, which is not what is measured here.
    write_key(folder / "service.key", "bench-wait-key")
    serve = Service(
        "serve",
        ["engine", "serve"],
        folder,
        "service.listening",
        child_env(
            {**settings, "COOP_OWNER_FILE": "",
             "COOP_METRICS_PORT": "off"}
        ),
        takes_port=False,
    )  # fmt: skip
    serve.start()
    try:
        cutover.cutover(serve.socket_path, actor="bench", db=db)
        _measure("routed", db, env, rounds)
    finally:
        serve.terminate()


if __name__ == "__main__":
    run(main)
