"""`coop-notifier` (also `python -m notifier`): the daemon and the one-shot drainer.

    coop-notifier run                  long-running: drain, sleep until a kick / due row / backstop;
                                       SIGTERM or SIGINT finishes the row in flight and exits 0
    coop-notifier drain [--max-runs N] one-shot: drain until the idle handoff releases, then exit 0
                                       (also what a producer's kick spawns, with COOP_DB set)

Exit status: 0 done (including "another worker holds the lock"), 2 a wrong setting, 1 any other
failure. Settings: see notifier.config.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

PROG = "coop-notifier"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coop-notifier")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Deliver the Coop outbox to the Chief's notify door."
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("run", help="the long-running daemon (kick socket, sleeps between rows)")
    drain = commands.add_parser("drain", help="drain once until the queue is idle, then exit")
    drain.add_argument(
        "--max-runs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N delivery attempts (the lock is released normally)",
    )
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--max-runs must be a whole number above 0, not {text!r}")
    return value


async def _stop_on_signal(stop: Callable[[], None]) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop()


async def _run_daemon() -> None:
    import anyio

    from notifier.config import NotifierConfig
    from notifier.daemon import Daemon

    daemon = Daemon(NotifierConfig.from_env())
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, daemon.stop)
        await daemon.run()
        tg.cancel_scope.cancel()


async def _drain(max_runs: int | None) -> None:
    import anyio
    import structlog

    from engine import kick
    from engine.store import open_connection
    from notifier.config import NotifierConfig
    from notifier.daemon import http_client_factory
    from notifier.store import Database
    from notifier.worker import DrainOutcome, Worker

    config = NotifierConfig.from_env()
    db = Database(lambda: open_connection(config.db_path))
    worker = Worker(config, db=db, client_factory=http_client_factory(config))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_stop_on_signal, worker.stop)
            report = await worker.drain(max_runs)
            tg.cancel_scope.cancel()
    finally:
        await worker.aclose()
        await db.aclose()
    log = structlog.get_logger("notifier.main")
    if report.outcome is DrainOutcome.STOPPED:
        # Stopped with a due row left: hand it to the daemon or a fresh drainer, never strand it.
        log.info("worker.handoff", outcome="kicked_successor", kick=kick.kick(config.db_path))
    log.info(
        "notifier.exit",
        outcome=report.outcome.value,
        delivered=report.delivered,
        deferred=report.deferred,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import anyio

    from notifier.errors import NotifierError
    from notifier.logs import configure_logging

    configure_logging()
    try:
        if args.command == "run":
            anyio.run(_run_daemon)
        else:
            anyio.run(_drain, args.max_runs)
    except NotifierError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main())
