"""A door that refuses a batch for its size (issue 19, item 3): a 413 (its body limit below what
the notifier's batch takes), or a 422 naming its row limit, makes the notifier send smaller
batches, halving down to one row, and every row is delivered once, in order. A row too large
for the door on its own is that row's own refusal: deferred, named, and the rows behind it
wait for it, not a loop. Real door on uvicorn (`door_stack`), real notifier worker."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from engine import direct
from engine import store as engine_store
from notifier.client import HttpDoorClient
from notifier.config import NotifierConfig
from notifier.delivery import Database
from notifier.worker import DrainOutcome, Worker
from tests.integration.notifier.notifier_helpers import add_rows, drain_once, lock_row, outbox_row
from tests.support.door import KEY, door_stack

pytestmark = pytest.mark.timeout(60)

# A row's text: ~300 bytes, so ~6 rows fit the door's body limit below, and 64 do not.
TEXT = "x" * 280
# The door's body limit: a few rows' batch, not a dozen, and not one row of 4,000 characters.
BODY_MAX_BYTES = 2048


def _worker(db_path: Path, socket_path: str, *, batch_max: int = 64) -> Worker:
    config = NotifierConfig(
        db_path=db_path,
        door_socket=Path(socket_path),
        service_key=KEY,
        client_timeout_s=5.0,
        backoff_base_s=30.0,  # a refused row is not tried again within the test
        backoff_max_s=30.0,
        backstop_s=30.0,
        batch_max=batch_max,
    )
    return Worker(
        config,
        db=Database(lambda: engine_store.open_connection(db_path)),
        client_factory=lambda: HttpDoorClient(
            str(config.door_socket), config.service_key, config.client_timeout_s
        ),
    )


def _states(db_path: Path) -> list[tuple[int, str, int]]:
    with direct.connection(db_path) as conn:
        found = conn.execute("SELECT id, state, attempts FROM coop_outbox ORDER BY id")
        return [(int(r["id"]), str(r["state"]), int(r["attempts"])) for r in found]


def _key(db_path: Path, outbox_id: int) -> str:
    """The row's delivery key: the `outbox_id` the door knows it by."""
    return str(outbox_row(db_path, outbox_id)["delivery_key"])


def _add(db_path: Path, count: int, prefix: str, text: str = TEXT) -> list[int]:
    ids = add_rows(db_path, count, prefix=prefix)
    with direct.connection(db_path) as conn, engine_store.write(conn):
        conn.executemany(
            "UPDATE coop_outbox SET text = ? || text WHERE id = ?", [(text, i) for i in ids]
        )
    return ids


@pytest.mark.parametrize(
    ("settings", "learned"),
    [
        # 413 for 40 rows, 20, 10: batches of 5 fit.
        ({"CHIEF_NOTIFY_BODY_MAX_BYTES": str(BODY_MAX_BYTES)}, 5),
        # 413 for 40 rows; 20 fit the body limit but not the door's 16 rows: 422 naming 16.
        ({"CHIEF_NOTIFY_BATCH_MAX": "16", "CHIEF_NOTIFY_BODY_MAX_BYTES": "8192"}, 16),
    ],
    ids=["413", "413-then-422"],
)
async def test_a_batch_refused_for_its_size_is_sent_smaller_and_every_row_delivered(
    db_path: Path, tmp_path: Path, settings: dict[str, str], learned: int
) -> None:
    ids = _add(db_path, 40, "row")
    async with door_stack(tmp_path, settings=settings, on_socket=True) as stack:
        worker = _worker(db_path, stack.socket_path)
        try:
            with capture_logs() as logs:
                report = await worker.drain()
                later = _add(db_path, 10, "later")
                again = await worker.drain()
        finally:
            await worker.aclose()
            await worker.db.aclose()
        assert (report.outcome, report.delivered, report.deferred) == (
            DrainOutcome.RELEASED,
            40,
            0,
        )
        assert (again.delivered, again.deferred) == (10, 0)
        for outbox_id in ids + later:
            assert await stack.chief_lines(_key(db_path, outbox_id)) == 1
        assert stack.chief is not None
        lines = [m.content for m in await stack.chief.recent_messages(100)]
        assert lines == [f"{TEXT}row {n}" for n in range(40)] + [
            f"{TEXT}later {n}" for n in range(10)
        ]
    assert _states(db_path) == [(i, "delivered", 1) for i in ids + later]
    assert lock_row(db_path) is None
    # Learned once, kept: the second drain's batches fit at once.
    limited = [e for e in logs if e["event"] == "notifier.batch.limited"]
    assert [(e["rows"], e["was"]) for e in limited] == [(learned, 64)]
    posts = [len(e["outbox_ids"]) for e in logs if e["event"] == "outbox.delivered"]
    assert max(posts) <= learned


async def test_a_row_too_large_for_the_door_alone_is_its_own_refusal(
    db_path: Path, tmp_path: Path
) -> None:
    ahead = _add(db_path, 5, "ahead")
    [big] = _add(db_path, 1, "big", text="y" * 3000)  # over the door's limit on its own
    behind = _add(db_path, 5, "behind")
    settings = {"CHIEF_NOTIFY_BODY_MAX_BYTES": str(BODY_MAX_BYTES)}
    async with door_stack(tmp_path, settings=settings, on_socket=True) as stack:
        worker = _worker(db_path, stack.socket_path)
        report, logs = await drain_once(worker)
        for outbox_id in ahead:
            assert await stack.chief_lines(_key(db_path, outbox_id)) == 1
        for outbox_id in (big, *behind):
            assert await stack.chief_lines(_key(db_path, outbox_id)) == 0
    # The drain ended (no loop on the big row): it is deferred, the rows behind it untouched.
    assert (report.outcome, report.delivered, report.deferred) == (DrainOutcome.RELEASED, 5, 1)
    assert _states(db_path) == [
        *[(i, "delivered", 1) for i in ahead],
        (big, "pending", 1),
        *[(i, "pending", 0) for i in behind],
    ]
    error = str(outbox_row(db_path, big)["last_error"])
    assert error == "HTTP 413 Request Entity Too Large: body_too_large"
    deferred = [e for e in logs if e["event"] == "outbox.deferred"]
    assert [e["outbox_id"] for e in deferred] == [big]
