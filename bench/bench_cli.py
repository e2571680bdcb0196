"""Cold-start cost of the `coop` CLI: median wall time of `coop todo add` and `coop todo done`
as fresh processes, against `python -c pass` on the same machine as the floor.

    .venv/bin/python bench/bench_cli.py [--runs 30]

Target (issue 2): each verb within 40 ms of the floor. Kicks are off: this measures the verb.
The engine's bytecode is compiled first, as an installed package has it.
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


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        env = dict(
            os.environ,
            COOP_HOME=home,
            COOP_KICK="off",
            COOP_ACTOR="bench",
            PYTHONPATH=str(ROOT),
        )
        env.pop("COOP_DB", None)
        # A real install has its bytecode compiled; this machine may set PYTHONDONTWRITEBYTECODE,
        # which would make every cold start recompile the engine from source.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        python = sys.executable
        subprocess.run(
            [python, "-m", "compileall", "-q", str(ROOT / "engine")], env=env, check=True
        )
        floor = [timed([python, "-c", "pass"], env) for _ in range(runs)]
        adds = [
            timed([python, "-m", "engine", "todo", "add", f"bench {i}"], env) for i in range(runs)
        ]
        dones = [
            timed([python, "-m", "engine", "todo", "done", str(i + 1)], env) for i in range(runs)
        ]
        imports = subprocess.run(
            [python, "-X", "importtime", "-m", "engine", "list"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    heavy = [name for name in ("httpx", "structlog", "fastapi") if f" {name}\n" in imports]
    floor_ms = statistics.median(floor)
    print(f"runs per figure: {runs}")
    print(f"python -c pass      median {floor_ms:6.1f} ms")
    for name, samples in (("coop todo add", adds), ("coop todo done", dones)):
        median = statistics.median(samples)
        print(f"{name:<19} median {median:6.1f} ms  (+{median - floor_ms:.1f} ms over the floor)")
    print(f"heavy imports on the verb path: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
