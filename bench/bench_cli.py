"""Cold-start cost of the `coop` CLI: `coop todo add`, `coop todo done` and `coop notify` as fresh
processes of the console script a user runs (`.venv/bin/coop`), against two yardsticks run in
turn with them: `python -c pass` (the floor) and a standard-library-only process doing the same
SQL as `todo done` (sqlite3, json and datetime, the same pragmas and statements).

    .venv/bin/python bench/bench_cli.py [--runs 30]

Target (issue 14): `coop todo done` within 25 ms of the floor, where the standard-library
process doing the same SQL was 8 ms over it. Each figure is the median of `--runs`, as wall
time and as the CPU time the process used (user + system, from wait4: the figure a loaded
machine disturbs least). Kicks are off: this measures the verb. The engine's bytecode is
compiled first, as an installed package has it. Also printed: every module the `done` verb
imports beyond the floor, to spot a heavy one coming back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: `coop todo done N` in the standard library alone: the yardstick's SQL is the verb's.
STDLIB_DONE = """
import json, os, sqlite3, sys, time
from datetime import UTC, datetime
n = int(sys.argv[1])
conn = sqlite3.connect(os.environ["COOP_DB"], timeout=30, isolation_level=None)
for pragma in ("busy_timeout = 30000", "journal_mode = WAL", "synchronous = FULL",
               "foreign_keys = ON"):
    conn.execute("PRAGMA " + pragma)
conn.execute("PRAGMA user_version").fetchone()
at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
conn.execute("BEGIN IMMEDIATE")
row = conn.execute("SELECT * FROM todos WHERE id = ?", (n,)).fetchone()
conn.execute("UPDATE todos SET status = 'done', closed_by = 'bench', closed_at = ?,"
             " updated_at = ? WHERE id = ? AND status IN ('open', 'taken')", (at, at, n))
conn.execute("INSERT INTO coop_events (item_kind, item_id, event, actor, at, payload)"
             " VALUES ('todo', ?, 'done', 'bench', ?, ?)", (n, at, json.dumps({"fast_path": True})))
conn.execute("INSERT INTO coop_outbox (kind, text, source, state, created_at, next_attempt_at,"
             " delivery_key) VALUES ('todo_done', ?, ?, 'pending', ?, ?, ?)",
             (f"todo #{n} done by bench: {row[1]}", f"todo:{n}", at, time.time(),
              "d-" + os.urandom(16).hex()))
conn.execute("COMMIT")
print(f"todo #{n} done")
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one process, run to its end."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall_ms = (time.perf_counter() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall_ms, (usage.ru_utime + usage.ru_stime) * 1000


def imported(cmd: list[str], env: dict[str, str]) -> list[str]:
    """The modules `cmd` (a python command) imports, from `-X importtime`."""
    err = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True, check=True
    ).stderr
    return [
        line.rsplit("|", 1)[1].strip() for line in err.splitlines() if line.startswith("import")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    python = sys.executable
    coop = str(Path(python).with_name("coop"))
    if not os.path.exists(coop):
        raise SystemExit(f"no console script at {coop}: install the project (ops/setup-venv)")
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, COOP_HOME=home, COOP_KICK="off", COOP_ACTOR="bench")
        env.pop("COOP_DB", None)
        # A real install has its bytecode compiled; this machine may set PYTHONDONTWRITEBYTECODE,
        # which would make every cold start recompile the engine from source.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(
            [python, "-m", "compileall", "-q", str(ROOT / "engine")], env=env, check=True
        )
        stdlib_env = dict(env, COOP_DB=str(Path(home) / "coop.db"))
        figures: dict[str, list[tuple[float, float]]] = {}
        # Every kind in turn within one round, so a drift of the machine's speed hits all alike.
        for i in range(runs):
            rounds = {
                "python -c pass": ([python, "-c", "pass"], env),
                "coop todo add": ([coop, "todo", "add", f"bench {i}"], env),
                "coop todo add ": ([coop, "todo", "add", f"yardstick {i}"], env),
                "coop todo done": ([coop, "todo", "done", str(2 * i + 1)], env),
                "coop notify": ([coop, "notify", f"bench note {i}"], env),
                "stdlib, same SQL": ([python, "-c", STDLIB_DONE, str(2 * i + 2)], stdlib_env),
            }
            for name, (cmd, cmd_env) in rounds.items():
                figures.setdefault(name, []).append(timed(cmd, cmd_env))
        floor_modules = set(imported([python, "-c", "pass"], env))
        verb_modules = imported([python, coop, "todo", "done", "1"], env)
    del figures["coop todo add "]  # the yardstick's row to finish, not a figure
    print(f"runs per figure: {runs}; median wall ms, median CPU ms (over the floor)")
    floor_wall = statistics.median(wall for wall, _ in figures["python -c pass"])
    floor_cpu = statistics.median(cpu for _, cpu in figures["python -c pass"])
    for name, samples in figures.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(
            f"{name:<17} wall {wall:6.1f} ms (+{wall - floor_wall:5.1f})"
            f"   cpu {cpu:6.1f} ms (+{cpu - floor_cpu:5.1f})"
        )
    extra = [name for name in verb_modules if name not in floor_modules]
    print(f"`coop todo done` imports beyond the floor ({len(extra)}): {' '.join(extra)}")


if __name__ == "__main__":
    main()
