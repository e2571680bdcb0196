"""Helpers for the notifier's tests: configs, producer-like commits, reading rows back."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from engine import direct
from engine import store as engine_store
from engine.outbox import enqueue
from notifier.config import NotifierConfig
from notifier.worker import DrainReport, Worker
from tests.support.loopback_door import SERVICE_KEY, row_ids


def make_config(db_path: Path, door_socket: str | None = None, **kw: float) -> NotifierConfig:
    """A config for `db_path` whose door is at `door_socket` (default: none listens there)."""
    settings: dict[str, float] = {
        "client_timeout_s": 5.0,
        "backoff_base_s": 0.05,
        "backoff_max_s": 0.2,
        "backstop_s": 30.0,
    }
    settings.update(kw)
    socket = Path(door_socket) if door_socket else db_path.parent / "no-door.sock"
    return NotifierConfig(db_path=db_path, door_socket=socket, service_key=SERVICE_KEY, **settings)


def add_rows(db_path: Path, count: int, prefix: str = "row") -> list[int]:
    """Commit `count` pending rows in one transaction, as a producer would; return their ids."""
    with direct.connection(db_path) as conn, engine_store.write(conn):
        return [enqueue(conn, "note", f"{prefix} {n}") for n in range(count)]


def sent_ids(db_path: Path, payloads: list[dict[str, str]]) -> list[int]:
    """The row ids of what a door was sent, in order (each `outbox_id` is a delivery key)."""
    return row_ids(db_path, [p["outbox_id"] for p in payloads])


def states(db_path: Path) -> dict[int, str]:
    with direct.connection(db_path) as conn:
        return {r["id"]: r["state"] for r in conn.execute("SELECT id, state FROM coop_outbox")}


def outbox_row(db_path: Path, outbox_id: int) -> dict[str, object]:
    with direct.connection(db_path) as conn:
        return dict(conn.execute("SELECT * FROM coop_outbox WHERE id = ?", (outbox_id,)).fetchone())


def lock_row(db_path: Path) -> dict[str, object] | None:
    with direct.connection(db_path) as conn:
        found = conn.execute("SELECT * FROM worker_lock").fetchone()
        return dict(found) if found else None


async def drain_once(worker: Worker) -> tuple[DrainReport, list[MutableMapping[str, Any]]]:
    """One drain and the log it wrote; the worker and its connection are closed after."""
    try:
        with capture_logs() as logs:
            report = await worker.drain()
    finally:
        await worker.aclose()
        await worker.db.aclose()
    return report, logs
