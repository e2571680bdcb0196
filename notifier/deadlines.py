"""The requests' deadlines, applied by the notifier daemon: the ledger decides a request whose
deadline has come (`engine.verbs.deadline`), and the daemon sleeps until the next one.

    deadlines = Deadlines(db_path, clock)
    next_at = await deadlines.apply_due(db)   # each due one in a transaction of its own

The daemon calls `apply_due` before each drain: at its start (deadlines that passed while no
daemon ran are applied at once, their event saying how late), after each kick (an add whose
deadline is sooner than the one it sleeps towards kicks it: `engine.kick.wakes_notifier`), and
when the earliest deadline it was told of comes. It sleeps until that deadline, never polls.

Each deadline is one `BEGIN IMMEDIATE` transaction on the daemon's connection (after a cutover
the owner service's, which passes the fence), committed with `synchronous=FULL`
(`engine.store.durable_write`): the close, its event and its outbox row together. The ledger
reads the request again inside it, so a tap from the phone that committed first leaves the
deadline nothing to do (one line: `notifier.deadline.already_settled`). After the commit the
waiters of the request are woken (`engine.kick.wake_waiters`), as after every settling commit;
the daemon drains the row right after, so it needs no kick of its own.

The one-shot drainer (`coop-notifier drain`) applies no deadline: it is spawned by a kick when
no daemon listens and exits when the queue is idle, so it could neither sleep until the next
deadline nor be relied on to come; a daemon applies every deadline that passed at its start.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from engine import kick as engine_kick
from engine import store as engine_store
from engine.config import EngineConfig
from engine.verbs import Unit
from engine.verbs import deadline as deadline_verbs
from notifier.delivery import Database


def _unit(conn: sqlite3.Connection, db_path: Path) -> Unit:
    return Unit(tx=lambda: conn, config=lambda: EngineConfig.from_env(db=db_path))


class Deadlines:
    """The daemon's part that applies due deadlines and says when the next one comes."""

    def __init__(self, db_path: Path, clock: Callable[[], float]) -> None:
        self.db_path = db_path
        self._clock = clock
        self.log = structlog.get_logger("notifier.deadline")

    async def apply_due(self, db: Database) -> float | None:
        """Apply every deadline that has come, each in a transaction of its own; answer the
        earliest deadline still ahead (epoch seconds), or None when no open request has one."""
        due, ahead = await db.call(self._due, self._clock())
        for request_id in due:
            answer = await db.call(self._apply, request_id, self._clock())
            if answer["applied"]:
                row = answer["request"]
                self.log.info(
                    "notifier.deadline.applied",
                    request_id=request_id,
                    outcome=row["status"],
                    choice=row["result_summary"],
                    late_s=answer["late_s"],
                    outbox_id=answer["outbox_id"],
                )
                engine_kick.wake_waiters(self.db_path, request_id)
            else:
                self.log.info("notifier.deadline.already_settled", request_id=request_id)
        return ahead

    def _due(self, conn: sqlite3.Connection, now_s: float) -> tuple[list[int], float | None]:
        with engine_store.snapshot(conn):
            return deadline_verbs.due_deadlines(_unit(conn, self.db_path), now_s)

    def _apply(self, conn: sqlite3.Connection, request_id: int, now_s: float) -> dict[str, Any]:
        with engine_store.durable_write(conn):
            return deadline_verbs.apply_deadline(_unit(conn, self.db_path), request_id, now_s)
