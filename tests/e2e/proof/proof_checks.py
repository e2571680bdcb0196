"""What the proof suite checks once a run settles, and the figures it prints.

`Producers` runs the producer processes and collects the outbox ids each was promised;
`settle` waits (bounded) until the stack has nothing left to do; `measure` reads coop.db,
chief.db and the emulator's file into `Figures`; `Figures.check` asserts the invariants.

Telegram repeats are counted per row (a row rung n times has n - 1 repeats) and bounded per
row by the door's in-doubt events: the sends whose outcome the door could not know (it died
between the send and the mark, the connection dropped after the request went out, or the late
reply's hard bound passed), each recorded in chief.db's `telegram_doubts` with the rows it
carried. A row may repeat at most once per in-doubt event that carried it.

The deaths inside the send-to-mark window are also measured, from outside the door, to check
that the door recorded each of them as in doubt. Which crashes landed there is measured, not
guessed, from three clocks of the same machine: the emulator's receipt time of each message,
the door's sent mark of each row, and the test's own record of each door death (`DoorDeath`).
A death landed in the window of row R when the emulator received a message for R between the
dead instance's start and its successor's spawn, and R had no sent mark at the moment of death
(its mark is later, or missing). The emulator stamps a message when its handler keeps it,
before it answers: a request the door wrote just before the SIGKILL may be stamped after the
death (a busy emulator reads it later; tests/e2e/proof/test_proof_late_receipt.py), and that
door never saw the answer. No other door runs until the successor is spawned, so every message
stamped before then is the dead instance's (or an earlier one's, outside its window). A
SIGKILL of the engine cannot ring twice: the door still marks the row, and the engine's resend
finds the mark (`already_sent`).

The door's sender may carry several rows in one Telegram message (a digest: "N updates", then
each row's text, separated by a blank line), and a repeat after an in-doubt event starts with
the door's marker; `carried_texts` reads a message back into the row texts it carries.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chief.phone.pacing import REPEAT_MARKER
from tests.e2e.proof.proof_stack import ProofStack
from tests.support.procs import REPO
from tests.support.waiting import wait_until_sync

PRODUCER_TIMEOUT_S = 120.0
DIGEST_HEAD = re.compile(r"^(\d+) updates\n\n")
DIGEST_SEPARATOR = "\n\n"
#: How a message is read back into the row texts it carries (`carried_texts`, or a run's own).
Reader = Callable[[str, dict[str, Any]], list[str]]


def carried_texts(text: str, known: set[str] | dict[str, Any]) -> list[str]:
    """The row texts one Telegram message carries: itself, or each entry of a digest (a row
    text holding a blank line is found by joining entries until one is known); a repeat's
    marker is read past."""
    if text in known:
        return [text]
    if text.startswith(REPEAT_MARKER):
        text = text.removeprefix(REPEAT_MARKER)
    if text in known:
        return [text]
    head = DIGEST_HEAD.match(text)
    if head is None:
        return [text]
    parts = text[head.end() :].split(DIGEST_SEPARATOR)
    found: list[str] = []
    start = 0
    while start < len(parts):
        for end in range(start + 1, len(parts) + 1):
            candidate = DIGEST_SEPARATOR.join(parts[start:end])
            if candidate in known:
                found.append(candidate)
                start = end
                break
        else:
            found.append(parts[start])  # a stray entry
            start += 1
    return found


@dataclass(frozen=True)
class DoorDeath:
    """One abnormal end of a door instance (SIGKILL or a fault point), in epoch seconds."""

    started_at: float  # just before the instance was spawned
    died_at: float  # just before the SIGKILL, or once its fault exit was seen
    # just before its successor was spawned: every message the emulator stamped before it and
    # since `started_at` was sent by this instance (a request it wrote before `died_at` may be
    # stamped after it, by an emulator slower to read it)
    successor_at: float


class Producers:
    """Producer processes (tests.e2e.proof.proof_producer), started together."""

    def __init__(self, stack: ProofStack) -> None:
        self.stack = stack
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *, seed: int, count: int, rate: float, tag: str, cli: bool = False) -> None:
        argv = [
            sys.executable, "-m", "tests.e2e.proof.proof_producer", "--seed", str(seed),
            "--count", str(count), "--rate", str(rate), "--tag", tag,
        ]  # fmt: skip
        self.procs.append(
            subprocess.Popen(
                [*argv, *(["--cli"] if cli else [])],
                env=self.stack.env(),
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )

    def finish(self) -> list[int]:
        """Wait for every producer (bounded); the outbox ids they were promised."""
        ids: list[int] = []
        for proc in self.procs:
            out, err = proc.communicate(timeout=PRODUCER_TIMEOUT_S)
            assert proc.returncode == 0, f"a producer failed ({proc.returncode}): {err}"
            ids += [int(line) for line in out.split()]
        return ids

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=PRODUCER_TIMEOUT_S)


def wait_delivered(stack: ProofStack, count: int, *, timeout_s: float, what: str) -> None:
    """Wait (bounded) until `count` rows were delivered: how the suite picks its moments."""
    wait_until_sync(
        lambda: stack.delivered_count() >= count, timeout_s=timeout_s, what=f"{count} rows {what}"
    )


def settle(
    stack: ProofStack,
    committed: set[int],
    *,
    timeout_s: float,
    read: Reader = carried_texts,
    silent: Callable[[dict[int, dict[str, Any]]], set[int]] = lambda rows: set(),
) -> None:
    """Wait until every committed row is delivered, the lock is free, and both destinations
    have every row (the Chief's line landed, Telegram rang; `silent` names the rows that ring
    nothing by design)."""

    def drained() -> bool:
        return (
            stack.pending_count() == 0
            and stack.delivered_count() >= len(committed)
            and stack.lock_holder() is None
        )

    wait_until_sync(drained, timeout_s=timeout_s, what="every row delivered and the lock free")

    def landed() -> bool:
        if stack.chief_unlanded() or set(stack.chief_lines()) < committed:
            return False
        rows = stack.outbox()
        known = {r["text"]: i for i, r in rows.items()}
        quiet = silent(rows)
        owed = {r["text"] for i, r in rows.items() if i not in quiet}
        rung = {t for m in stack.telegram_messages() for t in read(m["text"], known)}
        return owed <= rung

    wait_until_sync(landed, timeout_s=timeout_s, what="every Chief line landed, every row rung")


@dataclass
class Figures:
    seed: int
    rows_committed: int
    rows_in_ledger: int
    rows_delivered: int
    lost: int
    chief_per_row: Counter[int]  # how many rows have n Chief messages
    telegram_per_row: Counter[int]  # how many rows have n Telegram messages
    repeats_by_row: dict[int, int]  # outbox id -> times it rang after its first
    in_doubt_events: int  # sends the door recorded as in doubt
    doubts_by_row: Counter[int]  # outbox id -> in-doubt events that carried it
    stray_telegram: int  # texts matching no outbox row
    delivery_attempts: int
    crashes: dict[str, int]
    window_deaths: int
    lock_free: bool
    integrity: dict[str, str]
    half_written: int
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        per_chief = ", ".join(
            f"{n} line(s): {rows} rows" for n, rows in sorted(self.chief_per_row.items())
        )
        per_tg = ", ".join(
            f"{n} msg(s): {rows} rows" for n, rows in sorted(self.telegram_per_row.items())
        )
        in_doubt = sum(1 for n in self.doubts_by_row.values() if n)
        crashes = ", ".join(f"{k}={v}" for k, v in sorted(self.crashes.items())) or "none"
        return [
            f"PROOF_SEED={self.seed}",
            f"rows committed {self.rows_committed} (in coop.db: {self.rows_in_ledger}),"
            f" delivered {self.rows_delivered}, lost {self.lost}",
            f"Chief messages per row: {per_chief}",
            f"Telegram messages per row: {per_tg}; repeats per row: at most"
            f" {max(self.repeats_by_row.values(), default=0)}, {self.telegram_repeats} in all;"
            f" stray {self.stray_telegram}",
            f"in-doubt events {self.in_doubt_events}, carrying {in_doubt} rows",
            f"crashes: {crashes}; door deaths inside the send-to-mark window {self.window_deaths}",
            f"delivery attempts {self.delivery_attempts} for {self.rows_delivered} rows",
            f"worker lock free: {self.lock_free}; half-written Chief rows: {self.half_written};"
            f" integrity_check: {self.integrity}",
            *self.notes,
        ]

    def show(self, record: Any = None) -> None:
        for line in self.lines():
            print(line)
        if record is not None:
            for key in ("rows_committed", "rows_delivered", "lost", "telegram_repeats",
                        "in_doubt_events", "window_deaths", "delivery_attempts"):  # fmt: skip
                record(f"proof_{key}", getattr(self, key))

    @property
    def telegram_repeats(self) -> int:
        """Rings of a row after its first, summed over the rows."""
        return sum(self.repeats_by_row.values())

    def over_bound(self) -> dict[int, tuple[int, int]]:
        """Rows that repeated more often than the in-doubt events that carried them:
        outbox id -> (repeats, in-doubt events)."""
        return {
            row: (repeats, self.doubts_by_row.get(row, 0))
            for row, repeats in self.repeats_by_row.items()
            if repeats > self.doubts_by_row.get(row, 0)
        }

    def check(self) -> None:
        """The invariants every proof run keeps: each row repeats at most once per in-doubt
        event that carried it."""
        where = f"(replay with PROOF_SEED={self.seed})"
        assert self.rows_in_ledger == self.rows_committed, f"rows appeared or vanished {where}"
        assert self.lost == 0, f"{self.lost} rows lost {where}"
        assert set(self.chief_per_row) == {1}, f"Chief lines per row {self.chief_per_row} {where}"
        assert min(self.telegram_per_row) >= 1, f"a row never rang {where}"
        assert self.stray_telegram == 0, f"Telegram got text of no row {where}"
        over = self.over_bound()
        assert not over, (
            f"rows repeated past their in-doubt events (row: (repeats, events)):"
            f" {dict(sorted(over.items())[:10])} ({len(over)} rows) {where}"
        )
        assert self.lock_free, f"the worker lock is still held {where}"
        assert self.half_written == 0, f"half-written Chief rows {where}"
        assert self.integrity == {"coop.db": "ok", "chief.db": "ok"}, f"{self.integrity} {where}"


def start_note(stack: ProofStack) -> str:
    """How often each part started and how long it took to listen (the run's main cost)."""
    parts = []
    for part in stack.started:
        if part.start_s:
            mean_s = sum(part.start_s) / len(part.start_s)
            parts.append(f"{part.name} {len(part.start_s)}x (mean {mean_s:.2f} s)")
    return "starts, spawn to listening: " + ", ".join(parts)


def taken_after_death(stack: ProofStack, deaths: list[DoorDeath]) -> int:
    """Door deaths with a message the emulator stamped after the kill, before the successor
    was spawned: a request the dead door wrote that the emulator read late (for the record;
    `window_deaths` counts them where the row had no sent mark)."""
    stamps = [float(message["received_at"]) for message in stack.telegram_messages()]
    return sum(any(d.died_at < t < d.successor_at for t in stamps) for d in deaths)


def window_deaths(stack: ProofStack, deaths: list[DoorDeath], read: Reader = carried_texts) -> int:
    """Door deaths that left a row sent to Telegram and not marked (see the module docstring)."""
    marks = stack.sent_marks()
    sent: dict[int, list[float]] = {}
    by_text = {r["text"]: i for i, r in stack.outbox().items()}
    for message in stack.telegram_messages():
        for text in read(message["text"], by_text):
            row = by_text.get(text)
            if row is not None:
                sent.setdefault(row, []).append(float(message["received_at"]))
    found = 0
    for death in deaths:
        for row, times in sent.items():
            by_this_instance = any(death.started_at <= t < death.successor_at for t in times)
            mark = marks.get(row)
            if by_this_instance and (mark is None or mark > death.died_at):
                found += 1
                break  # one death is one in-doubt event, however many rows it carried
    return found


def measure(
    stack: ProofStack,
    *,
    seed: int,
    committed: set[int],
    crashes: dict[str, int],
    deaths: list[DoorDeath],
) -> Figures:
    rows = stack.outbox()
    delivered = {i for i, r in rows.items() if r["state"] == "delivered"}
    chief = stack.chief_lines()
    by_text = {r["text"]: i for i, r in rows.items()}
    rung: Counter[int] = Counter()
    stray = 0
    for message in stack.telegram_messages():
        for text in carried_texts(message["text"], by_text):
            row = by_text.get(text)
            if row is None:
                stray += 1
                continue
            rung[row] += 1
    events, doubts = stack.in_doubt_events()
    lost = len(committed - (delivered & set(chief) & set(rung)))
    return Figures(
        seed=seed,
        rows_committed=len(committed),
        rows_in_ledger=len(rows),
        rows_delivered=len(delivered),
        lost=lost,
        chief_per_row=Counter(chief.get(i, 0) for i in rows),
        telegram_per_row=Counter(rung.get(i, 0) for i in rows),
        repeats_by_row={row: n - 1 for row, n in rung.items() if n > 1},
        in_doubt_events=events,
        doubts_by_row=doubts,
        stray_telegram=stray,
        delivery_attempts=sum(int(r["attempts"]) for r in rows.values()),
        crashes=crashes,
        window_deaths=window_deaths(stack, deaths),
        lock_free=stack.lock_holder() is None,
        integrity=stack.integrity(),
        half_written=stack.chief_half_written(),
    )
