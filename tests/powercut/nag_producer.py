"""A producer of nags for the power-cut run, run as its own process like the proof's producers.

    python -m tests.powercut.nag_producer --seed S --rate R --tag T --kinds K,K,...

Each row is one seeded nag, filed with the real `coop` command (the flags are the CLI's):

    deadline   `coop request add TITLE --to OWNER --choices approve,decline --deadline Ds`
               (4 to 7 s), with `--default CHOICE` or without (the deadline then abandons it)
    remind     the same with `--remind 1s` (COOP_REMIND_MAX, set by the run, bounds them), and
               a deadline from 8 to 10 s (4 to 7 s with `--calm`: filed after the cuts, when
               no backlog holds its reminders back)
    urgent     the same (a deadline, a default or not) with `--urgent`
    shout      `coop notify --urgent TEXT`

`--kinds` is the run's plan for this producer (a restart after a cut gets what is left of it),
so a small run still files each kind. Every title and text holds the nag's label
(`nag <tag>-<i>`), which the run's owner and checks find it by, then its kind (`[remind]`), which
the owner decides by (tests.powercut.powercut_owner). Each committed outbox id is
printed the moment its command returned, as the proof's producers print theirs.
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import time

KINDS = ("deadline", "remind", "urgent", "shout")
CHOICES = ("approve", "decline")
DEADLINE_S = (4, 5, 6, 7)  # short: each passes inside the run; the ask rings 1 to 4 s after filing
# Longer for a request with reminders: they ring paced behind the chat's other messages (about
# one a second), and a reminder due at or after the deadline never rings.
REMIND_DEADLINE_S = (8, 9, 10)
DEFAULT_SHARE = 0.5  # of the requests, filed with a default (the rest are abandoned)
OWNER = "owner"  # the stack's CHIEF_OWNER (tests.support.stack.OWNER)
CLI_TIMEOUT_S = 60.0


def coop(*args: str) -> int:
    """Run one `coop` command; the outbox id it queued (`notification #N queued`)."""
    done = subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False,
    )  # fmt: skip
    found = re.search(r"notification #(\d+) queued", done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"coop {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return int(found.group(1))


def label(tag: str, index: int) -> str:
    """The nag's label: unique in the run, and what its messages are found by."""
    return f"nag {tag}-{index}"


def command(kind: str, name: str, rng: random.Random, *, calm: bool = False) -> list[str]:
    """The `coop` arguments that file one nag of `kind` named `name` (its text says its kind
    after the label, `nag T-3 [remind]: may I`, which the run's owner reads)."""
    if kind == "shout":
        return ["notify", "--urgent", f"{name} [{kind}]: the freezer is warm"]
    title = f"{name} [{kind}]: may I"
    args = ["request", "add", title, "--to", OWNER, "--choices", ",".join(CHOICES)]
    # In calm (`--calm`: filed after the cuts, the chat idle) reminders ring at once, one a
    # second: the plain deadline leaves room for them.
    deadline_s = rng.choice(REMIND_DEADLINE_S if kind == "remind" and not calm else DEADLINE_S)
    args += ["--deadline", f"{deadline_s}s"]
    if rng.random() < DEFAULT_SHARE:
        args += ["--default", rng.choice(CHOICES)]
    if kind == "remind":
        args += ["--remind", "1s"]
    if kind == "urgent":
        args += ["--urgent"]
    return args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nag_producer")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="nags a second")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--kinds", required=True, help="comma-separated, one per nag, in order")
    parser.add_argument("--calm", action="store_true", help="filed after the cuts: no backlog")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"nag_producer: unknown kinds {sorted(unknown)}")
    started = time.monotonic()
    for i, kind in enumerate(kinds):
        # Pacing shapes the load over the run; it synchronises with nothing.
        ahead_s = started + (i + rng.random()) / args.rate - time.monotonic()
        if ahead_s > 0:
            time.sleep(ahead_s)
        print(coop(*command(kind, label(args.tag, i), rng, calm=args.calm)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
