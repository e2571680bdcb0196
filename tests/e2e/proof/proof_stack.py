"""The proof suite's harness: the stack's three long-running processes as real subprocesses.

    stack = Stack(tmp_path)              # one data folder: coop.db, chief.db, the key, the logs
    stack.start()                        # emulator, door, engine service; each on loopback
    stack.door.kill(); stack.door.start(faults="door.after_report")
    stack.stop()                         # SIGTERM each, returns the exit statuses
    stack.close()                        # SIGKILL whatever a failed test left running

Each process is a `tests.support.procs.Service`. It starts on port 0 the first time and logs its
port in its `*.listening` line; a restart reuses that port (the engine reads the door's URL
once, the door the emulator's), so a killed part comes back where its peers look for it. Every
start logs to its own file under `<folder>/logs/`. Producers write coop.db directly (local mode,
no owner file) and wake the daemon with a datagram (`COOP_KICK=datagram`): no detached one-shot
drainer can outlive a test.

The reads below open their own short connections and never write: the test watches the
databases the way an operator would.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support.procs import REPO, Service, clean_env, write_key

SQLITE_TIMEOUT_S = 10.0
BOT_TOKEN = "123456:proof-suite"
CHAT_ID = "4242"
OWNER = "owner"
ACTOR = "prover"
SERVICE_KEY = "proof-suite-service-key-0123456789abcdef"
NOTIFY_PATH = "/api/coop/engine/notify"
REPORT_KEY_PREFIX = "chief-report:coop-notify:"


def base_env(folder: Path, **settings: str) -> dict[str, str]:
    """The parent's environment without any Coop, Chief, Telegram or PTB setting, plus ours."""
    ours = {
        "COOP_DB": str(folder / "coop.db"),
        "COOP_SERVICE_KEY_FILE": str(folder / "service.key"),
        "COOP_ACTOR": ACTOR,
        "COOP_KICK": "datagram",
        "CHIEF_OWNER": OWNER,
        # Short deferrals: a door that is down for a restart is retried within 0.2 s of its return.
        "COOP_BACKOFF_BASE_S": "0.05",
        "COOP_BACKOFF_MAX_S": "0.2",
        "COOP_CLIENT_TIMEOUT_S": "10",
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "TELEGRAM_CHAT_ID": CHAT_ID,
        "TELEGRAM_TIMEOUT_S": "5",
    }
    return clean_env(folder, **(ours | settings))


class Stack:
    """The emulator, the door and the engine service over one data folder."""

    def __init__(
        self,
        folder: Path,
        *,
        door_env: dict[str, str] | None = None,
        engine_env: dict[str, str] | None = None,
        emulator_args: tuple[str, ...] = (),
    ) -> None:
        self.folder = folder
        self.coop_db = folder / "coop.db"
        self.chief_db = folder / "chief.db"
        self.telegram_log = folder / "telegram.jsonl"
        write_key(folder / "service.key", SERVICE_KEY)
        self.emulator = Service(
            "emulator",
            ["chief", "telegram-emulator", "--host", "127.0.0.1", "--token", BOT_TOKEN,
             "--log", str(self.telegram_log), *emulator_args],
            folder,
            "emulator.listening",
            base_env(folder),
        )  # fmt: skip
        self.door = Service(
            "door",
            ["chief", "serve"],
            folder,
            "door.listening",
            base_env(folder, **(door_env or {})),
            port_env="CHIEF_PORT",
        )
        self.engine = Service(
            "engine",
            ["engine", "serve"],
            folder,
            "service.listening",
            base_env(folder, **(engine_env or {})),
            port_env="COOP_SERVICE_PORT",
            keep_port=False,  # nobody looks for the owner endpoint here: any port will do
        )

    @property
    def parts(self) -> tuple[Service, Service, Service]:
        return (self.emulator, self.door, self.engine)

    def env(self, **settings: str) -> dict[str, str]:
        """A producer's environment: the same folder and database."""
        return base_env(self.folder, **settings)

    def start(self) -> None:
        self.emulator.start()
        self.door.env["TELEGRAM_API_BASE"] = f"http://127.0.0.1:{self.emulator.port}/bot"
        self.door.start()
        self.engine.env["COOP_DOOR_URL"] = f"http://127.0.0.1:{self.door.port}{NOTIFY_PATH}"
        self.engine.start()

    def stop(self) -> dict[str, int]:
        """SIGTERM the engine, then the door, then the emulator; their exit statuses."""
        return {part.name: part.terminate() for part in reversed(self.parts) if part.running}

    def close(self) -> None:
        for part in self.parts:
            if part.running:
                part.kill()

    # -- the emulator's control endpoint ----------------------------------------------------

    def arm_telegram_fault(self, **fault: Any) -> None:
        url = f"http://127.0.0.1:{self.emulator.port}/emulator/faults"
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            answer = client.post(url, json=fault)
        assert answer.status_code == 200, answer.text

    def reset_telegram(self) -> None:
        """Forget the emulator's armed faults (and its in-memory messages; the file stays)."""
        url = f"http://127.0.0.1:{self.emulator.port}/emulator/reset"
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            assert client.post(url).status_code == 200

    def telegram_calls(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.emulator.port}/emulator/calls"
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            return dict(client.get(url).json())

    def chief_order(self) -> list[int]:
        """Outbox ids of the Chief's coop lines, in the conversation's order."""
        rows = self._query(
            self.chief_db,
            "SELECT external_request_id FROM messages WHERE external_request_id LIKE ? ORDER BY id",
            REPORT_KEY_PREFIX + "%",
        )
        return [int(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows]

    def telegram_faults_left(self) -> int:
        url = f"http://127.0.0.1:{self.emulator.port}/emulator/faults"
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            return sum(f["remaining"] for f in client.get(url).json()["faults"])

    def telegram_queue_depth(self) -> int:
        """The door's Telegram queue depth, from its status endpoint."""
        url = f"http://127.0.0.1:{self.door.port}{NOTIFY_PATH.rsplit('/', 1)[0]}/status"
        with httpx.Client(timeout=10.0, trust_env=False) as client:
            answer = client.get(url, headers={"X-Coop-Service-Key": SERVICE_KEY})
        assert answer.status_code == 200, answer.text
        return int(answer.json()["telegram_queue"]["depth"])

    # -- reads ------------------------------------------------------------------------------

    def coop(self, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
        """The `coop` CLI as a real process on this stack's ledger."""
        return subprocess.run(
            [sys.executable, "-m", "engine", *args],
            env=self.env(**settings),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def _query(self, db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if not db.exists():
            return []
        with closing(sqlite3.connect(db, timeout=SQLITE_TIMEOUT_S)) as conn:
            return conn.execute(sql, params).fetchall()

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
        return Counter(int(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows)

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
        return {int(str(r[0]).removeprefix(REPORT_KEY_PREFIX)) for r in rows}

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
        return {int(r[0]): datetime.fromisoformat(r[1]).timestamp() for r in rows}

    def telegram_messages(self) -> list[dict[str, Any]]:
        """Every message the emulator accepted, across its restarts (its JSON lines file)."""
        if not self.telegram_log.exists():
            return []
        return [
            json.loads(line)
            for line in self.telegram_log.read_text().splitlines()
            if line.strip().endswith("}")  # a line being appended right now is skipped
        ]

    def integrity(self) -> dict[str, str]:
        return {
            db.name: str(self._query(db, "PRAGMA integrity_check")[0][0])
            for db in (self.coop_db, self.chief_db)
        }


#: The `make_stack` fixture: `make_stack(door_env=..., engine_env=...)`.
MakeStack = Callable[..., Stack]
