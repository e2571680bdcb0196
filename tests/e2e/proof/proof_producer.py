"""A producer of proof rows, run as its own process by the proof suite.

    python -m tests.e2e.proof.proof_producer --seed S --count N --rate R --tag T [--cli]

Makes `count` reportable changes on the ledger in `COOP_DB`, each one seeded choice of: a todo
added then done, a request added then closed, or an explicit notify. The library mode calls
the engine's verbs (one process, ~1 ms a row), which kick the daemon after each commit as they
do for the CLI; `--cli` runs the real `coop` command for every verb (~100 ms a call). Rows are paced
to `rate` a second so they keep coming while the test kills things. Each committed outbox id
is printed on its own line the moment its commit returned: what the producer was promised.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

KINDS = ("todo", "request", "notify")
CLI_TIMEOUT_S = 60.0


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"coop {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    if found is None:
        raise SystemExit(f"no {pattern!r} in {text!r}")
    return int(found.group(1))


def produce_cli(kind: str, label: str) -> int:
    if kind == "todo":
        todo_id = _number(r"todo #(\d+) added", _cli("todo", "add", label))
        out = _cli("todo", "done", str(todo_id), "--summary", f"{label} finished")
    elif kind == "request":
        request_id = _number(r"request #(\d+) added", _cli("request", "add", label))
        out = _cli("request", "close", str(request_id), "--summary", f"{label} closed")
    else:
        out = _cli("notify", f"{label}: a note for the owner", "--kind", "proof")
    return _number(r"notification #(\d+) queued", out)


def produce_library(kind: str, label: str, actor: str, db: Path) -> int:
    from engine import ledger, outbox

    if kind == "todo":
        todo = ledger.add_todo(label, actor=actor)["todo"]
        result = ledger.done_todo(todo["id"], actor=actor, result_summary=f"{label} finished")
    elif kind == "request":
        request = ledger.add_request(label, actor=actor)["request"]
        result = ledger.close_request(request["id"], actor=actor, result_summary=f"{label} closed")
    else:
        result = outbox.notify(f"{label}: a note for the owner", actor=actor, kind="proof")
    # No kick here: the verbs kick after their own commit, as for the CLI (COOP_KICK says how).
    return int(result["outbox_id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="proof_producer")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="rows a second")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--cli", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    db = Path(os.environ["COOP_DB"])
    actor = os.environ["COOP_ACTOR"]
    started = time.monotonic()
    for i in range(args.count):
        # Pacing shapes the load over the run; it synchronises with nothing.
        ahead_s = started + i / args.rate - time.monotonic()
        if ahead_s > 0:
            time.sleep(ahead_s)
        kind = rng.choice(KINDS)
        label = f"proof {args.tag}-{i}"
        if args.cli:
            outbox_id = produce_cli(kind, label)
        else:
            outbox_id = produce_library(kind, label, actor, db)
        print(outbox_id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
