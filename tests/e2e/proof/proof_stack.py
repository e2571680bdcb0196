"""The proof suite's stack: `tests.support.stack.Stack` (the emulator, the door and the engine
service as real processes over one data folder), plus the reads the proof's checks make.

    stack = make_stack(door_env=..., engine_env=...)    # the fixture; killed after the test
    stack.start(); stack.door.kill(); stack.door.start(faults="door.after_report")
    stack.outbox(); stack.chief_lines(); stack.telegram_messages(); stack.stop()

The reads open their own short connections and never write: the test watches the databases
the way an operator would.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.support.procs import coop
from tests.support.stack import Stack

SQLITE_TIMEOUT_S = 10.0
REPORT_KEY_PREFIX = "chief-report:coop-notify:"


class ProofStack(Stack):
    """The stack, and what an operator reads of coop.db, chief.db and the emulator's file."""

    def telegram_queue_depth(self) -> int:
        """The door's Telegram queue depth, from its status endpoint."""
        return int(self.door_status()["telegram_queue"]["depth"])

    def chief_order(self) -> list[int]:
        """Outbox ids of the Chief's coop lines, in the conversation's order."""
        rows = self._query(
            self.chief_db,
            "SELECT external_request_id FROM messages WHERE external_request_id LIKE ? ORDER BY id",
            REPORT_KEY_PREFIX + "%",
        )
        ids = self._row_ids()
        return [ids(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows]

    # -- reads ------------------------------------------------------------------------------

    def coop(self, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
        """The `coop` CLI as a real process on this stack's ledger."""
        return coop(*args, env=self.env(**settings), inherit=False)

    def _query(self, db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if not db.exists():
            return []
        with closing(sqlite3.connect(db, timeout=SQLITE_TIMEOUT_S)) as conn:
            return conn.execute(sql, params).fetchall()

    def _row_ids(self) -> Callable[[str], int]:
        """The coop.db row id of a delivery key (what the door knows a row by); a key that
        names no row fails the read: the door holds something the ledger never wrote."""
        known = dict(self._query(self.coop_db, "SELECT delivery_key, id FROM coop_outbox"))

        def row_id(key: str) -> int:
            assert key in known, f"the door holds outbox id {key!r}, which names no coop.db row"
            return int(known[key])

        return row_id

    def outbox(self) -> dict[int, dict[str, Any]]:
        """Every coop_outbox row by id: state, text, attempts, last error."""
        rows = self._query(
            self.coop_db, "SELECT id, state, text, attempts, last_error FROM coop_outbox"
        )
        return {
            int(r[0]): {"state": r[1], "text": r[2], "attempts": r[3], "last_error": r[4]}
            for r in rows
        }

    def delivered_count(self) -> int:
        rows = self._query(
            self.coop_db, "SELECT COUNT(*) FROM coop_outbox WHERE state = 'delivered'"
        )
        return int(rows[0][0]) if rows else 0

    def pending_count(self) -> int:
        rows = self._query(self.coop_db, "SELECT COUNT(*) FROM coop_outbox WHERE state = 'pending'")
        return int(rows[0][0]) if rows else 0

    def lock_holder(self) -> tuple[Any, ...] | None:
        rows = self._query(self.coop_db, "SELECT owner, pid FROM worker_lock")
        return rows[0] if rows else None

    def chief_lines(self) -> Counter[int]:
        """Chief messages per outbox id (by their report key)."""
        rows = self._query(
            self.chief_db,
            "SELECT external_request_id FROM messages WHERE external_request_id LIKE ?",
            REPORT_KEY_PREFIX + "%",
        )
        ids = self._row_ids()
        return Counter(ids(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows)

    def chief_unlanded(self) -> int:
        rows = self._query(
            self.chief_db, "SELECT COUNT(*) FROM chief_report_outbox WHERE message_id IS NULL"
        )
        return int(rows[0][0]) if rows else 0

    def chief_reported(self) -> set[int]:
        """Outbox ids whose report the Chief holds durably (landed or still queued)."""
        rows = self._query(
            self.chief_db,
            "SELECT source_key FROM chief_report_outbox WHERE source_key LIKE ?",
            REPORT_KEY_PREFIX + "%",
        )
        ids = self._row_ids()
        return {ids(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows}

    def chief_half_written(self) -> int:
        """Messages without their outbox record, or outbox records pointing at no message:
        either would be a landing that committed one write of its two."""
        orphans = self._query(
            self.chief_db,
            "SELECT COUNT(*) FROM messages m WHERE m.external_request_id LIKE 'chief-report:%'"
            " AND NOT EXISTS (SELECT 1 FROM chief_report_outbox o WHERE o.message_id = m.id)",
        )
        dangling = self._query(
            self.chief_db,
            "SELECT COUNT(*) FROM chief_report_outbox o WHERE o.message_id IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = o.message_id)",
        )
        return int(orphans[0][0]) + int(dangling[0][0]) if orphans else 0

    def sent_marks(self) -> dict[int, float]:
        """The door's sent marks: outbox id -> when it was marked (epoch seconds)."""
        rows = self._query(self.chief_db, "SELECT outbox_id, sent_at FROM coop_notify_sent")
        ids = self._row_ids()
        return {ids(str(r[0])): datetime.fromisoformat(r[1]).timestamp() for r in rows}

    def sends_in_flight(self) -> int:
        """The door's Telegram queue entries with an in-flight record (a send not yet answered)."""
        rows = self._query(
            self.chief_db, "SELECT COUNT(*) FROM telegram_queue WHERE send_id IS NOT NULL"
        )
        return int(rows[0][0]) if rows else 0

    def in_doubt_events(self) -> tuple[int, Counter[int]]:
        """The door's in-doubt events (sends whose outcome it could not know, recorded in
        chief.db's `telegram_doubts`): how many, and for each outbox id how many carried it.
        A chief.db without the table has recorded none."""
        tables = self._query(
            self.chief_db, "SELECT 1 FROM sqlite_master WHERE name = 'telegram_doubts'"
        )
        if not tables:
            return 0, Counter()
        rows = self._query(
            self.chief_db, "SELECT send_id, outbox_id FROM telegram_doubts ORDER BY send_id"
        )
        events = {str(r[0]) for r in rows}
        ids = self._row_ids()  # the door knows a row by its delivery key, not its id
        return len(events), Counter(ids(str(r[1])) for r in rows if r[1] is not None)

    def telegram_messages(self) -> list[dict[str, Any]]:
        """Every message the emulator accepted, across its restarts (its JSON lines file)."""
        if not self.receipt_log.exists():
            return []
        return [
            json.loads(line)
            for line in self.receipt_log.read_text().splitlines()
            if line.strip().endswith("}")  # a line being appended right now is skipped
        ]

    def integrity(self) -> dict[str, str]:
        return {
            db.name: str(self._query(db, "PRAGMA integrity_check")[0][0])
            for db in (self.coop_db, self.chief_db)
        }


#: The `make_stack` fixture: `make_stack(door_env=..., engine_env=...)`.
MakeStack = Callable[..., ProofStack]
