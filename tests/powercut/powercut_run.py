"""The seeded power-cut run: coop.db and chief.db live on the power-cut layer, producers write
all the while, and at seeded moments the power goes. Then the promises are checked.

    python -m tests.powercut.powercut_run --rows 1000 --cuts 5 --seed 7     # ops/powercut

One cut, in order: every process of the house (the door, `coop serve`, every producer and the
`coop` commands it runs) is SIGKILLed at the same instant; the layer drops the writes nobody
fsynced (all of them, or a seeded half, the last one maybe torn; see
`tests.support.powercut_fs`); the layer mounts again over what survived; the stack and the
producers start again. The Telegram emulator is Telegram: it is not in the house, it lives
through every cut, and its receipt log is off the layer.

Three kinds of cut, because a seeded moment almost never lands in the narrowest windows:
- the first is aimed at the door's send-to-mark window: the door dies (fault point
  `door.after_telegram_send`) after Telegram accepted a message and before its sent mark, and
  the power goes at once (a message in doubt; it rings again after the boot);
- the second follows a crash mid-commit: a `coop notify` is killed inside its commit's fsync
  (the layer stalls it there), the house crashes with it and boots on the same disk, where
  SQLite's recovery may show the unsynced row; once every row is delivered, the power goes;
- the rest wait for a seeded share of the rows to be delivered, plus a few seeded milliseconds.

What the run checks at the end (`Outcome.check`):
- every row whose producer's commit returned (the producer printed its id) is delivered, has its
  Chief line and rang Telegram: an acknowledged write survives a cut;
- every row coop.db holds is delivered (none stranded), and the worker lock is free;
- the Chief has exactly one line per row;
- Telegram repeats are bounded by the in-doubt events: the door instances a cut or the crash
  took while a row they had rung had no durable sent mark (`window_deaths`, from the emulator's
  receipt clock and the marks: a message stamped after the kill but before the successor was
  spawned is the dead door's, a request it wrote that a busy emulator read late), and those are
  no more than the door's deaths (the door's own count, `telegram_doubts`, is printed beside);
- no Telegram text of a row coop.db does not hold (a ring the ledger forgot);
- `PRAGMA integrity_check` is ok on both databases, and no Chief row is half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chief.telegram.pairing import SECOND_PAIRING_FILE_NAME, Pairing, write_pairing
from tests.e2e.proof.proof_checks import (
    DoorDeath,
    settle,
    taken_after_death,
    wait_delivered,
    window_deaths,
)
from tests.e2e.proof.proof_stack import REPORT_KEY_PREFIX as REPORT_PREFIX
from tests.e2e.proof.proof_stack import SQLITE_TIMEOUT_S, ProofStack
from tests.powercut import powercut_nags as nags
from tests.powercut.powercut_owner import Owner
from tests.support.powercut import Layer, LayerUnavailable, fuse_unavailable
from tests.support.procs import REPO
from tests.support.waiting import wait_until_sync

PRODUCERS = 2  # library producers (the engine's verbs in a process of their own)
CLI_SHARE = 0.05  # of the rows, made by a producer that runs the real `coop` command per verb
PRODUCE_S = 10.0  # rows arrive over about this long (cuts stretch it)
CUT_KEEPS = (0.0, 0.5)  # each cut drops every held write, or keeps a seeded half of them
EVENT_WAIT_S = 90.0
SETTLE_S = 120.0
PRODUCER_TIMEOUT_S = 120.0
CUT_JITTER_S = 0.05
# The first cut is aimed: the door dies at this point (after Telegram accepted a message, before
# its sent mark) and the power goes at once. A random moment almost never lands there.
SEND_POINT = "door.after_telegram_send"
FAULT_EXIT_STATUS = 86


class PowerCutStack(ProofStack):
    """The proof stack with both databases on the layer and everything else (the key, the
    logs, the emulator's receipt log) off it. Reads are read-only: a reader that happened to be
    the last connection would otherwise checkpoint and delete the WAL, writing for the house."""

    def __init__(self, folder: Path, layer: Layer) -> None:
        coop_db, chief_db = layer.path / "coop.db", layer.path / "chief.db"
        # The data folder too: the owner file and the callers' receipts live there.
        # `coop serve`'s socket (the door's taps and every routed call reach it there) in the
        # run's own private folder, off the layer: a socket is no file a power cut can lose.
        on_layer = {
            "COOP_DB": str(coop_db),
            "CHIEF_DB": str(chief_db),
            "COOP_HOME": str(layer.path),
            "COOP_SERVICE_SOCKET": str(folder / "service.sock"),
        } | nags.ENGINE_ENV
        door_env = on_layer | nags.DOOR_ENV
        super().__init__(folder, door_env=door_env, engine_env=on_layer)
        self.coop_db, self.chief_db = coop_db, chief_db
        self.receipts = layer.path / "receipts"
        self.on_layer = on_layer

    def cutover(self) -> None:
        """`coop cutover` to the running `coop serve`: from now on every call is routed to it."""
        done = self.coop("cutover")
        assert done.returncode == 0, done.stderr

    def reconcile_uncertain(self) -> int:
        """`coop reconcile KEY` for every receipt left uncertain (its caller died mid-call)."""
        uncertain = [r["key"] for r in self.receipt_files().values() if r["state"] == "uncertain"]
        for key in uncertain:
            done = self.coop("reconcile", key)
            assert done.returncode == 0, done.stderr
        return len(uncertain)

    def receipt_files(self) -> dict[str, dict[str, Any]]:
        """Every receipt by key; one that does not parse (a name without its bytes) is
        `{"state": "torn"}`, which no reader can use and the run counts as a failure."""
        if not self.receipts.is_dir():
            return {}
        found: dict[str, dict[str, Any]] = {}
        for path in self.receipts.glob("*.json"):
            try:
                found[path.stem] = dict(json.loads(path.read_text()))
            except ValueError:
                found[path.stem] = {"key": path.stem, "state": "torn"}
        return found

    def commands(self) -> dict[str, str]:
        """The owner's command log: request key -> outcome."""
        rows = self._query(self.coop_db, "SELECT key, outcome FROM coop_commands")
        return {str(r[0]): str(r[1]) for r in rows}

    def env(self, **settings: str) -> dict[str, str]:
        return super().env(**(self.on_layer | settings))

    def outbox(self) -> dict[int, dict[str, Any]]:
        """Every row by id, as the proof reads it, with its kind, delivery key and extras (one
        read: the house may be writing)."""
        rows = self._query(
            self.coop_db,
            "SELECT id, state, text, attempts, last_error, kind, delivery_key, extra"
            " FROM coop_outbox",
        )
        return {
            int(r[0]): {
                "state": r[1],
                "text": r[2],
                "attempts": r[3],
                "last_error": r[4],
                "kind": r[5],
                "delivery_key": r[6],
                "extra": json.loads(r[7]) if r[7] else None,
            }
            for r in rows
        }

    def chief_lines(self) -> Counter[int]:
        """Chief lines per row: the door's own lines about an urgent report (keyed after the
        report's row, `#urgent-ack`, `#urgent-expired`) are the nags' to count."""
        rows = self._query(
            self.chief_db,
            "SELECT external_request_id FROM messages WHERE external_request_id LIKE ?"
            " AND external_request_id NOT LIKE '%#%'",
            REPORT_PREFIX + "%",
        )
        ids = self._row_ids()
        return Counter(ids(str(r[0]).removeprefix(REPORT_PREFIX)) for r in rows)

    def silent_rows(self, rows: dict[int, dict[str, Any]]) -> set[int]:
        """Rows that ring nothing by design: an answer from the phone (`ring: false`), and an
        ask settled before it rang (chief.db: its buttons void, no message of it)."""
        quiet = {i for i, r in rows.items() if (r["extra"] or {}).get("ring") is False}
        if not self.has_table(self.chief_db, "asks"):
            return quiet
        unrung = {
            str(r[0])
            for r in self._query(
                self.chief_db,
                "SELECT ask_key FROM asks a WHERE voided_at IS NOT NULL AND NOT EXISTS"
                " (SELECT 1 FROM ask_messages m WHERE m.ask_key = a.ask_key)",
            )
        }
        asks = {i: ((r["extra"] or {}).get("ask") or {}).get("key") for i, r in rows.items()}
        return quiet | {i for i, key in asks.items() if key in unrung}

    def read(self, db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """A read-only query of either database (the nags' reads)."""
        return self._query(db, sql, *params)

    def has_table(self, db: Path, name: str) -> bool:
        found = self._query(
            db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", name
        )
        return bool(found)

    def _query(self, db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if not db.exists():
            return []
        uri = f"file:{db}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=SQLITE_TIMEOUT_S)) as conn:
            return conn.execute(sql, params).fetchall()

    def snapshot(self) -> dict[str, int]:
        """What each commit point holds right now, counted: compared across a cut, what the
        cut undid (the house is dead on both sides of it, so nothing moves meanwhile)."""
        queries = {
            "outbox rows (producer, FULL)": (self.coop_db, "SELECT COUNT(*) FROM coop_outbox"),
            "delivery marks (notifier, NORMAL)": (
                self.coop_db, "SELECT COUNT(*) FROM coop_outbox WHERE state = 'delivered'"),
            "accepted reports (door, FULL)": (
                self.chief_db, "SELECT COUNT(*) FROM chief_report_outbox"),
            "landed lines (Chief, NORMAL)": (
                self.chief_db, "SELECT COUNT(*) FROM chief_report_outbox"
                " WHERE message_id IS NOT NULL"),
            "sent marks (sender, FULL)": (self.chief_db, "SELECT COUNT(*) FROM coop_notify_sent"),
        }  # fmt: skip
        found = {}
        for name, (db, sql) in queries.items():
            rows = self._query(db, sql)
            found[name] = int(rows[0][0]) if rows else 0
        return found

    def integrity(self) -> dict[str, str]:
        """`PRAGMA integrity_check` on both databases, once the house is stopped."""
        found = {}
        for db in (self.coop_db, self.chief_db):
            with closing(sqlite3.connect(db, timeout=SQLITE_TIMEOUT_S)) as conn:
                found[db.name] = str(conn.execute("PRAGMA integrity_check").fetchone()[0])
        return found


class Producers:
    """Producer processes (tests.e2e.proof.proof_producer, and the nags'
    tests.powercut.nag_producer), each in its own process group so a cut also takes the `coop`
    command it is running; restarted after a cut with what is left."""

    def __init__(self, stack: PowerCutStack, rng: random.Random, rows: int) -> None:
        self.stack = stack
        self.rng = rng
        cli_rows = max(1, int(rows * CLI_SHARE))
        library = rows - cli_rows
        shares = [library // PRODUCERS + (n < library % PRODUCERS) for n in range(PRODUCERS)]
        # name -> [rows still to make, is it the CLI producer, its pace in rows a second]
        self.left: dict[str, list[Any]] = {
            f"p{n}": [c, False, c / PRODUCE_S] for n, c in enumerate(shares)
        }
        self.left["cli"] = [cli_rows, True, cli_rows / PRODUCE_S]
        # The nags still to file, in order (each kind at least once).
        self.nags = nags.plan_kinds(rng, nags.nag_count(rows))
        self.nag_rate = len(self.nags) / nags.FILE_WITHIN_S
        self.generation = 0
        self.running: dict[str, subprocess.Popen[str]] = {}
        self.acknowledged: set[int] = set()

    def start(self) -> None:
        self.generation += 1
        argvs = {}
        for name, (count, cli, rate) in self.left.items():
            if count > 0:
                argvs[name] = [
                    "tests.e2e.proof.proof_producer", "--count", str(count), "--rate", str(rate),
                    "--tag", f"{name}.{self.generation}", *(["--cli"] if cli else []),
                ]  # fmt: skip
        if self.nags:
            argvs["nag"] = [
                "tests.powercut.nag_producer", "--kinds", ",".join(self.nags),
                "--rate", str(self.nag_rate), "--tag", f"nag.{self.generation}",
            ]  # fmt: skip
        for name, argv in argvs.items():
            seed = ["--seed", str(self.rng.randrange(2**32))]
            self.running[name] = subprocess.Popen(
                [sys.executable, "-m", *argv, *seed], env=self.stack.env(), cwd=REPO,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, start_new_session=True,
            )  # fmt: skip

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.running.values() if proc.poll() is None]

    def reap(self, *, killed: bool) -> None:
        """Collect every producer: the ids it printed are acknowledged (its commit returned)."""
        for name, proc in self.running.items():
            out, err = proc.communicate(timeout=PRODUCER_TIMEOUT_S)
            ids = [int(line) for line in out.split()]
            self.acknowledged.update(ids)
            if name == "nag":
                self.nags = self.nags[len(ids) :]
            else:
                self.left[name][0] -= len(ids)
            if not killed:
                assert proc.returncode == 0, f"producer {name} failed ({proc.returncode}): {err}"
        self.running = {}


@dataclass
class Cut:
    kind: str  # "send window", "after a crash" or "seeded"
    at_s: float
    layer: dict[str, Any]
    undone: dict[str, int]  # by commit point: how many the cut took back


@dataclass
class Outcome:
    seed: int
    rows: int
    cuts: list[Cut]
    acknowledged: int
    in_ledger: int
    delivered: int
    lost: int
    chief_per_row: Counter[int]
    telegram_per_row: Counter[int]
    repeat_messages: int
    in_doubt: int
    door_in_doubt: int  # the in-doubt events the door itself recorded (`telegram_doubts`)
    late_receipts: int  # door deaths with a message the emulator took after the kill
    door_deaths: int
    stray: int
    lock_free: bool
    integrity: dict[str, str]
    half_written: int
    wall_s: float
    silent: int  # rows that ring nothing by design (an answer from the phone, an ask settled
    # before it rang)
    nags: nags.NagFigures
    receipts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        per = ", ".join(f"{n}: {r}" for n, r in sorted(self.chief_per_row.items()))
        tg = ", ".join(f"{n}: {r}" for n, r in sorted(self.telegram_per_row.items()))
        return [
            f"POWERCUT_SEED={self.seed} rows {self.rows} cuts {len(self.cuts)}"
            f" wall {self.wall_s:.1f} s",
            *(
                f"cut {n + 1} ({c.kind}) at {c.at_s:.1f} s: held {c.layer['held_writes']}"
                f" writes, kept {c.layer['kept_writes']}, torn {c.layer['torn'] is not None},"
                f" names undone {c.layer['names_undone']} of {c.layer['names_pending']}; undid"
                f" {', '.join(f'{k} {v}' for k, v in c.undone.items() if v) or 'nothing'}"
                for n, c in enumerate(self.cuts)
            ),
            f"rows acknowledged {self.acknowledged}, in coop.db {self.in_ledger}, delivered"
            f" {self.delivered}, lost {self.lost}",
            f"Chief lines per row (lines: rows) {per}",
            f"Telegram messages per row (messages: rows) {tg}; repeat messages"
            f" {self.repeat_messages}; in-doubt events {self.in_doubt} (of {self.door_deaths} door"
            f" deaths, {self.late_receipts} with a message taken after the kill; the door"
            f" recorded {self.door_in_doubt}); stray {self.stray}; silent by"
            f" design {self.silent}",
            *self.nags.lines(),
            f"lock free {self.lock_free}; half-written Chief rows {self.half_written};"
            f" integrity {self.integrity}",
            *([f"receipts {self.receipts}"] if self.receipts else []),
            *self.notes,
        ]

    def check(self) -> None:
        where = f"(replay with POWERCUT_SEED={self.seed})"
        assert self.lost == 0, f"{self.lost} acknowledged rows lost {where}"
        assert self.delivered == self.in_ledger, f"rows left undelivered {where}"
        assert set(self.chief_per_row) == {1}, f"Chief lines per row {self.chief_per_row} {where}"
        assert min(self.telegram_per_row) >= 1, f"a row never rang {where}"
        assert self.stray == 0, f"Telegram rang {self.stray} texts coop.db does not hold {where}"
        # The aimed cut lands in the send-to-mark window: the bound below is never vacuous.
        assert self.in_doubt >= 1, f"the aimed cut left no message in doubt {where}"
        most = max(self.telegram_per_row)
        assert most - 1 <= self.in_doubt, (
            f"a row rang {most} times, in doubt {self.in_doubt} {where}"
        )
        assert self.repeat_messages <= self.in_doubt <= self.door_deaths, (
            f"{self.repeat_messages} repeats, {self.in_doubt} in-doubt events,"
            f" {self.door_deaths} door deaths ({self.late_receipts} with a message taken after"
            f" the kill; the door recorded {self.door_in_doubt} in-doubt events) {where}"
        )
        # The sender has one message in flight at a time: each door death leaves at most one
        # message in doubt, a row's or a nag's (a reminder, an urgent ring).
        assert self.repeat_messages + self.nags.repeats <= self.door_deaths, (
            f"{self.repeat_messages} repeats and {self.nags.repeats} nag repeats for"
            f" {self.door_deaths} door deaths {where}"
        )
        self.nags.check(where)
        assert self.lock_free, f"the worker lock is still held {where}"
        assert self.half_written == 0, f"half-written Chief rows {where}"
        assert self.integrity == {"coop.db": "ok", "chief.db": "ok"}, f"{self.integrity} {where}"
        if self.receipts:
            assert self.receipts["uncertain"] == 0, f"receipts left unsettled {where}"
            assert self.receipts["torn"] == 0, f"receipts a cut left empty {where}"
            assert self.receipts["committed_without_receipt"] == 0, (
                f"the owner filed calls whose receipts the cut took {self.receipts} {where}"
            )
            assert self.receipts["receipt_committed_owner_not"] == 0, (
                f"receipts say committed where the owner's log does not {self.receipts} {where}"
            )


class PowerCutRun:
    """One seeded run over `folder`: the layer, the stack, the producers and the cuts."""

    def __init__(
        self, folder: Path, *, seed: int, rows: int, cuts: int, owner: bool = False
    ) -> None:
        self.seed, self.rows, self.cut_count, self.owner = seed, rows, cuts, owner
        self.rng = random.Random(seed)
        self.layer = Layer(folder / "layer")
        self.stack = PowerCutStack(folder, self.layer)
        self.producers = Producers(self.stack, self.rng, rows)
        self.cuts: list[Cut] = []
        self.deaths: list[DoorDeath] = []
        self.owner_rng = random.Random(self.rng.randrange(2**32))
        self.phone: Owner | None = None  # the owner at the phone, once the emulator is up
        self.door_started_at = 0.0
        self.began = 0.0
        #: the nags filed after the cuts (`file_unrung_nags`): (kind, in calm)
        self.late_nags: list[tuple[str, bool]] = []

    def _start_house(self) -> None:
        """The door and `coop serve` over the layer (the emulator, once up, runs throughout);
        the second person paired before the first start (their pairing on the layer, synced)."""
        self.door_started_at = time.time()
        if self.stack.emulator.running:
            self.stack.door.start()
        else:
            second = Pairing(nags.SECOND_ID, nags.SECOND_ID, None, "Second", "@coop_bot",
                             "2026-12-06T00:00:00+00:00")  # fmt: skip
            write_pairing(self.layer.path / SECOND_PAIRING_FILE_NAME, second)
            self.stack.start_door()
        self.stack.start_engine()

    def cut(self, kind: str = "seeded") -> None:
        """The power goes: every process of the house dies at once, the layer forgets what
        nobody synced, and the house boots again on what survived."""
        house = [p for p in (self.stack.door, self.stack.engine) if p.running]
        producers = self.producers.pids()
        died_at = time.time()
        for part in house:
            os.kill(part.pid, signal.SIGKILL)
        for pid in producers:
            os.killpg(pid, signal.SIGKILL)  # the producer and the `coop` command it runs
        for part in house:
            part.kill()  # reaps
        self.producers.reap(killed=True)
        before = self.stack.snapshot()
        keep = self.rng.choice(CUT_KEEPS)
        figures = self.layer.cut(
            seed=self.rng.randrange(2**32), keep=keep, tear=self.rng.random() < 0.5
        )
        figures["keep"] = keep
        self.layer.mount()
        after = self.stack.snapshot()
        undone = {name: before[name] - after[name] for name in before}
        self.cuts.append(Cut(kind, time.monotonic() - self.began, figures, undone))
        # The dead door's sends are the emulator's receipts from its start until its successor
        # is spawned (a request already on the wire at the kill lands in between).
        self.deaths.append(DoorDeath(self.door_started_at, died_at, successor_at=time.time()))
        self._start_house()
        self.producers.start()

    def aimed_cut(self) -> None:
        """A cut aimed at the door's send-to-mark window: the door, restarted armed, dies just
        after a Telegram send, and the power goes at once. The message rang, its sent mark was
        never written: an in-doubt event, rung again after the boot. The armed door may reach
        the point before it listens (its sender rings what the stopped door left queued as it
        starts): that death is the point's all the same."""
        door = self.stack.door
        assert door.terminate() == 0
        self.door_started_at = time.time()
        door.start(faults=SEND_POINT, wait=False)
        wait_until_sync(
            lambda: door.events(door.listening_event) or not door.running,
            timeout_s=EVENT_WAIT_S,
            what=f"the armed door to listen or to reach its point (POWERCUT_SEED={self.seed})",
        )
        if door.running:
            door.wait_listening()
        pushed = self.stack.coop("notify", f"powercut aimed-{self.seed}: a row for the window")
        assert pushed.returncode == 0, pushed.stderr
        self.producers.acknowledged.add(int(pushed.stdout.split("#")[1].split()[0]))
        assert door.wait_exit(EVENT_WAIT_S) == FAULT_EXIT_STATUS
        self.cut("send window")

    def crash_then_cut(self) -> None:
        """The house crashes while a `coop notify` is inside its commit's fsync (its WAL frames
        written, not synced), boots again on the same disk (the kernel still holds those frames:
        SQLite's recovery shows the row), runs until that row is delivered, and only then does
        the power go."""
        text = f"powercut unsynced-{self.seed}: a row whose commit never synced"
        pusher = subprocess.Popen(
            [sys.executable, "-m", "engine", "notify", text], env=self.stack.env(), cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        # Who commits it: the `coop` process itself, or after a cutover the owner service.
        committer = self.stack.engine.pid if self.owner else pusher.pid
        self.layer.request(op="stall", name="coop.db-wal", pid=committer)
        wait_until_sync(
            lambda: self.layer.stats()["stalled"], timeout_s=EVENT_WAIT_S,
            what=f"a commit stalled in its fsync (POWERCUT_SEED={self.seed})",
        )  # fmt: skip
        house = [p for p in (self.stack.door, self.stack.engine) if p.running]
        died_at = time.time()
        for part in house:
            os.kill(part.pid, signal.SIGKILL)
        for pid in [pusher.pid, *self.producers.pids()]:
            os.killpg(pid, signal.SIGKILL)
        self.layer.request(op="unstall")  # the killed fsync ends (failed), nothing synced
        pusher.wait(PRODUCER_TIMEOUT_S)
        for part in house:
            part.kill()
        self.producers.reap(killed=True)
        # The crash took the door too: a message it had rung may be in doubt as after a cut.
        self.deaths.append(DoorDeath(self.door_started_at, died_at, successor_at=time.time()))
        self._start_house()
        wait_until_sync(
            lambda: self.stack.pending_count() == 0 and self.stack.lock_holder() is None,
            timeout_s=EVENT_WAIT_S,
            what=f"every row delivered after the crash (POWERCUT_SEED={self.seed})",
        )
        self.cut("after a crash")

    def run(self) -> Outcome:
        self.layer.mount()
        try:
            return self._run()
        finally:
            if self.phone is not None:
                self.phone.stop()
            self.stack.close()
            for pid in self.producers.pids():
                os.killpg(pid, signal.SIGKILL)
            self.layer.close()

    def _run(self) -> Outcome:
        self.began = time.monotonic()
        self._start_house()
        # The owner, like the emulator, is outside the house: at the phone through every cut.
        self.phone = Owner(self.stack.emulator.url, self.owner_rng, ack_within_s=nags.EXPIRE_S / 2)
        self.phone.start()
        if self.owner:
            self.stack.cutover()
        self.producers.start()
        thresholds = sorted(
            int(self.rng.uniform(0.05, 0.8) * self.rows) for _ in range(self.cut_count)
        )
        for n, threshold in enumerate(thresholds):
            wait_delivered(
                self.stack, threshold, timeout_s=EVENT_WAIT_S,
                what=f"before cut {n + 1} (POWERCUT_SEED={self.seed})",
            )  # fmt: skip
            if n == 0:
                self.aimed_cut()
                continue
            if n == 1:
                self.crash_then_cut()
                continue
            time.sleep(self.rng.uniform(0, CUT_JITTER_S))  # picks the moment; synchronises nothing
            self.cut()
        # The cuts are over: what no nag alive can ring any more is filed now, beside the rest
        # of the rows; then again once every nag has ended (`file_unrung_nags`).
        self.file_unrung_nags(calm=False)
        for proc in self.producers.running.values():
            proc.wait(PRODUCER_TIMEOUT_S)
        self.producers.reap(killed=False)
        self.wait_nags_done()
        if self.file_unrung_nags(calm=True):
            self.wait_nags_done()
        settle(
            self.stack, self.producers.acknowledged, timeout_s=SETTLE_S, read=nags.row_texts,
            silent=self.stack.silent_rows,
        )  # fmt: skip
        reconciled = self.stack.reconcile_uncertain() if self.owner else 0
        assert self.phone is not None
        self.phone.stop()
        exits = self.stack.stop()
        assert exits == {"engine": 0, "door": 0, "emulator": 0}, exits
        outcome = self.measure()
        if self.owner:
            outcome.receipts = self.receipt_figures(reconciled)
        return outcome

    def wait_nags_done(self) -> None:
        wait_until_sync(
            lambda: nags.nags_done(self.stack, self.stack.outbox()), timeout_s=SETTLE_S,
            what=f"every deadline decided, every urgent report stopped (POWERCUT_SEED={self.seed})",
        )  # fmt: skip

    def file_unrung_nags(self, *, calm: bool) -> bool:
        """The cuts over: one more nag of each kind whose ring Telegram never received
        (`nags.unrung`) and no nag alive may still ring (`nags.live_kinds`), filed now, so
        every run rings what it checks (`calm`: nothing else is left to ring, so the plain
        deadline leaves room for the reminders). Whether any was filed."""
        live = nags.live_kinds(self.stack, self.stack.outbox())
        filing = self.producers.running.get("nag")
        if filing is not None and filing.poll() is None:
            live |= set(self.producers.nags)  # still to be filed, or just filed: alive
        unrung = nags.unrung(self.stack.telegram_messages())
        # Once each way: a nag filed beside the last rows may still be held back by them; one
        # filed in calm rings (its owner waits for what the run must see).
        filed = {kind for kind, was_calm in self.late_nags if was_calm == calm}
        missing = [kind for kind in unrung if kind not in live and kind not in filed]
        if not missing:
            return False
        self.late_nags += [(kind, calm) for kind in missing]
        argv = [
            sys.executable, "-m", "tests.powercut.nag_producer", "--kinds", ",".join(missing),
            "--rate", "2", "--tag", f"late.{len(self.late_nags)}",
            "--seed", str(self.rng.randrange(2**32)), *(["--calm"] if calm else []),
        ]  # fmt: skip
        done = subprocess.run(
            argv, env=self.stack.env(), cwd=REPO, capture_output=True, text=True,
            timeout=PRODUCER_TIMEOUT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"the late nags failed ({done.returncode}): {done.stderr}"
        self.producers.acknowledged.update(int(line) for line in done.stdout.split())
        return True

    def receipt_figures(self, reconciled: int) -> dict[str, int]:
        """The callers' receipts against the owner's command log, once every one is settled."""
        receipts = self.stack.receipt_files()
        commands = self.stack.commands()
        filed = {key for key, outcome in commands.items() if outcome == "committed"}
        said = {key for key, r in receipts.items() if r["state"] == "committed"}
        return {
            "files": len(receipts),
            "reconciled": reconciled,
            "uncertain": sum(1 for r in receipts.values() if r["state"] == "uncertain"),
            "torn": sum(1 for r in receipts.values() if r["state"] == "torn"),
            "committed_without_receipt": len(filed - set(receipts)),
            "receipt_committed_owner_not": len(said - filed),
        }

    def measure(self) -> Outcome:
        stack = self.stack
        rows = stack.outbox()
        delivered = {i for i, r in rows.items() if r["state"] == "delivered"}
        chief = stack.chief_lines()
        by_text = {r["text"]: i for i, r in rows.items()}
        messages = stack.telegram_messages()
        rung: Counter[int] = Counter()
        stray = repeats = 0
        for message in messages:
            repeated = False
            for text in nags.row_texts(message["text"], by_text):
                row = by_text.get(text)
                if row is None:
                    stray += 1
                    continue
                repeated = repeated or rung[row] > 0
                rung[row] += 1
            repeats += repeated
        silent = stack.silent_rows(rows)
        acknowledged = self.producers.acknowledged
        assert self.phone is not None
        return Outcome(
            seed=self.seed,
            rows=self.rows,
            cuts=self.cuts,
            acknowledged=len(acknowledged),
            in_ledger=len(rows),
            delivered=len(delivered),
            lost=len(acknowledged - (delivered & set(chief) & (set(rung) | silent))),
            chief_per_row=Counter(chief.get(i, 0) for i in rows),
            telegram_per_row=Counter(rung.get(i, 0) for i in rows if i not in silent),
            repeat_messages=repeats,
            in_doubt=window_deaths(stack, self.deaths, read=nags.row_texts),
            door_in_doubt=stack.in_doubt_events()[0],
            late_receipts=taken_after_death(stack, self.deaths),
            door_deaths=len(self.deaths),
            stray=stray,
            lock_free=stack.lock_holder() is None,
            integrity=stack.integrity(),
            half_written=stack.chief_half_written(),
            wall_s=time.monotonic() - self.began,
            silent=len(silent),
            nags=nags.measure(stack, rows, messages, self.phone.taps, time.time()),
            notes=[f"nags filed after the cuts: {late_words(self.late_nags)}"],
        )


def late_words(late: list[tuple[str, bool]]) -> str:
    """`remind, shout (in calm)`, or `none`."""
    return ", ".join(kind + (" (in calm)" if calm else "") for kind, calm in late) or "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ops/powercut", description="A seeded power-cut run over the whole stack."
    )
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--cuts", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    parser.add_argument("--owner", action="store_true", help="after `coop cutover`: receipts")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = parser.parse_args(argv)
    reason = fuse_unavailable()
    if reason is not None:
        print(f"ops/powercut: FUSE is not available here ({reason})", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    folder = Path(tempfile.mkdtemp(prefix="powercut-"))
    print(f"POWERCUT_SEED={seed} rows {args.rows} cuts {args.cuts} folder {folder}", flush=True)
    try:
        outcome = PowerCutRun(
            folder, seed=seed, rows=args.rows, cuts=args.cuts, owner=args.owner
        ).run()
    except LayerUnavailable as exc:
        print(f"ops/powercut: {exc}", file=sys.stderr)
        return 2
    except AssertionError as exc:
        print(f"ops/powercut: the run failed: {exc} (its folder: {folder})", file=sys.stderr)
        return 1
    print("\n".join(outcome.lines()))
    try:
        outcome.check()
    except AssertionError as exc:
        print(f"ops/powercut: a promise broke: {exc} (its folder: {folder})", file=sys.stderr)
        return 1
    if not args.keep:
        subprocess.run(["rm", "-rf", str(folder)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
