"""The peer queue for bench_vs_huey: huey (SqliteHuey storage) doing the notifier's job.

    .venv/bin/python bench/huey_job.py consume --db huey.db [--delay 0.1] [--max-delay 10]
                                               [--backoff 1.15]

`make_huey(db)` builds the huey instance and its one task, `deliver(text, outbox_id)`, which
posts to the Chief's notify door exactly as the notifier does: on the door's Unix socket, checked
private before each request, the same JSON body `{text, kind, outbox_id}`, the same
`X-Coop-Service-Key` header, one keep-alive httpx client for the worker's life, proxies from the
environment ignored. A non-200 answer raises, so huey
retries the task (3 retries, 1 s apart) — the notifier defers a refused row in the same spirit.

The producer (bench_vs_huey) calls `make_huey(db)` and enqueues with `deliver(...)`; the
consumer is this file run as a process, through huey's Consumer API with one worker thread
(huey's default) and the polling given on the command line (huey's defaults are 0.1 s, x1.15,
10 s). The task is registered under a fixed name, from the module `huey_job` on both sides.
The door's socket and key come from `COOP_DOOR_SOCKET` (default `<COOP_HOME>/door.sock`) and
`COOP_SERVICE_KEY_FILE`, as for the notifier.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
from pathlib import Path
from typing import Any

TASK_NAME = "coop_bench_deliver"
CLIENT_TIMEOUT_S = 15.0
SERVICE_KEY_HEADER = "X-Coop-Service-Key"
NOTIFY_PATH = "/api/coop/engine/notify"
TASK_RETRIES = 3
TASK_RETRY_DELAY_S = 1


def make_huey(db: Path) -> tuple[Any, Any]:
    """(huey instance, deliver task) on the SQLite file `db`, huey's storage defaults otherwise."""
    import httpx
    from huey import SqliteHuey

    from plumbing import door as door_address
    from plumbing.unix import check_private

    huey = SqliteHuey(name="coop-bench", filename=str(db))
    client: dict[str, httpx.Client] = {}  # one per worker process, made at the first task
    socket_path = door_address.socket_path(os.environ)

    def door() -> httpx.Client:
        if "c" not in client:
            key = Path(os.environ["COOP_SERVICE_KEY_FILE"]).read_text().strip()
            client["c"] = httpx.Client(
                transport=httpx.HTTPTransport(uds=socket_path),
                base_url=door_address.BASE_URL,
                headers={SERVICE_KEY_HEADER: key},
                timeout=httpx.Timeout(CLIENT_TIMEOUT_S),
                trust_env=False,
            )
        return client["c"]

    @huey.task(name=TASK_NAME, retries=TASK_RETRIES, retry_delay=TASK_RETRY_DELAY_S)
    def deliver(text: str, outbox_id: str) -> None:
        check_private(socket_path)  # as the notifier checks it before each request
        response = door().post(
            NOTIFY_PATH, json={"text": text, "kind": "note", "outbox_id": outbox_id}
        )
        if response.status_code != 200:
            raise RuntimeError(f"door answered {response.status_code}: {response.text[:200]}")

    return huey, deliver


def main() -> None:
    parser = argparse.ArgumentParser(description="a huey consumer for bench_vs_huey")
    parser.add_argument("command", choices=["consume"])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--delay", type=float, default=0.1, help="huey's initial_delay (s)")
    parser.add_argument("--max-delay", type=float, default=10.0, help="huey's max_delay (s)")
    parser.add_argument("--backoff", type=float, default=1.15, help="huey's backoff factor")
    args = parser.parse_args()
    # huey logs "Huey consumer started ..." at INFO: the bench waits for that line.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # huey keys tasks by "<module>.<name>": build them from the module the producer imports
    # (`huey_job`), not from `__main__`, or the consumer would not know the producer's task.
    huey, _ = importlib.import_module("huey_job").make_huey(args.db)
    consumer = huey.create_consumer(
        workers=1,
        worker_type="thread",
        periodic=False,
        initial_delay=args.delay,
        max_delay=args.max_delay,
        backoff=args.backoff,
    )
    consumer.run()


if __name__ == "__main__":
    main()
