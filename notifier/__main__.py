"""`coop-notifier` (also `python -m notifier`): the daemon and the one-shot drainer.

    coop-notifier serve                the engine service, what `coop serve` runs
                                       (notifier.engine_service): the owner's compat endpoint
                                       and this daemon in one process
    coop-notifier run                  long-running: drain, sleep until a kick / due row / backstop;
                                       SIGTERM or SIGINT finishes the row in flight and exits 0
    coop-notifier drain [--max-runs N] [--no-wait]
                                       one-shot: drain until the idle handoff releases, then exit 0
                                       (also what a producer's kick spawns, with COOP_DB set); a
                                       head deferred for at most a minute is waited out first
                                       (notifier.waiter), unless --no-wait (the retry timer's)

Exit status: 0 done (including "another worker holds the lock"), 2 a wrong setting, 1 any other
failure (one line on stderr, never a traceback). Settings: see notifier.config.

Stop signals: SIGTERM and SIGINT ask the worker to finish the row in flight and stop, however
many arrive and whenever they arrive. Their handlers are plain `signal.signal` handlers that
stay installed for the whole process (an event loop's own handlers are removed when it closes,
and a signal in that window would kill a process that is already finishing), and on the way
out the signals are ignored.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from notifier.config import NotifierConfig
    from notifier.delivery import Claim
    from notifier.holder import Holder

PROG = "coop-notifier"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("coop-notifier")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked (importlib.metadata is slow to import)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(f"{PROG} {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Deliver the Coop outbox to the Chief's notify door."
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="show the version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "serve", help="the engine service (`coop serve`): owner endpoint and daemon in one process"
    )
    commands.add_parser("run", help="the long-running daemon (kick socket, sleeps between rows)")
    drain = commands.add_parser("drain", help="drain once until the queue is idle, then exit")
    drain.add_argument(
        "--max-runs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="stop after N delivery attempts (the lock is released normally)",
    )
    drain.add_argument(
        "--no-wait",
        action="store_true",
        help="exit after the idle handoff even when the head row is deferred for a short while"
        " (for a timer that runs the drain again anyway)",
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


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stop_on_signals(stop: Callable[[], None]) -> None:
    """From now on, a stop signal calls `stop()` on this event loop (idempotent; any number)."""
    import asyncio

    loop = asyncio.get_running_loop()

    def handler(signum: int, frame: object) -> None:
        # RuntimeError: the loop has closed, the process is already on its way out.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(stop)

    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)


def _ignore_stop_signals() -> None:
    """The work is done: a late stop signal must not turn a clean exit into a kill."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


async def _run_daemon() -> None:
    from notifier.config import NotifierConfig
    from notifier.daemon import Daemon

    daemon = Daemon(NotifierConfig.from_env())
    _stop_on_signals(daemon.stop)
    await daemon.run()


def _claim_cheaply(config: NotifierConfig) -> tuple[Holder, Claim]:
    """Check-and-claim with the standard library and the engine only.

    Most kicked drainers lose the lock to the one already draining; they learn it and exit in
    tens of milliseconds, before anyio, structlog or httpx are imported.
    """
    from engine.store import now_iso
    from notifier import delivery
    from notifier.holder import this_worker

    me = this_worker("drain")
    conn = delivery.open_own_connection(config.db_path)
    try:
        return me, delivery.claim_lock(conn, me, now_iso())
    finally:
        conn.close()


def _drain_command(max_runs: int | None, wait: bool) -> None:
    from notifier.config import NotifierConfig
    from notifier.delivery import owner_service_drains
    from plumbing.logs import configure_logging, emit_plain

    config = NotifierConfig.from_env()
    if not config.db_path.exists():
        # Nothing to drain, and a drain is no write of the ledger's: the retry timer of a
        # fresh install (or a wrong COOP_HOME) must not leave an empty ledger behind.
        emit_plain(
            "notifier.exit",
            outcome="no_ledger",
            note=f"no ledger at {config.db_path}: nothing to drain",
        )
        return
    if owner_service_drains(config.db_path):
        # After a cutover the owner service's daemon drains; a drainer would only be fenced out
        # (say, the retry timer left enabled beside `coop serve`).
        emit_plain(
            "notifier.exit",
            outcome="owner_service_drains",
            note="this ledger is in service mode: its owner service (coop serve) drains it",
        )
        return
    me, claim = _claim_cheaply(config)
    if not claim.acquired:
        holder = claim.holder
        emit_plain(
            "worker.lock.busy",
            owner=me.owner,
            holder=holder.owner if holder else None,
            holder_pid=holder.pid if holder else None,
        )
        emit_plain("notifier.exit", owner=me.owner, outcome="lock_busy", delivered=0, deferred=0)
        return
    configure_logging()
    import anyio

    anyio.run(_drain, config, me, claim, max_runs, wait)


async def _drain(
    config: NotifierConfig, me: Holder, claim: Claim, max_runs: int | None, wait: bool
) -> None:
    import anyio
    import structlog

    from engine import kick
    from notifier.daemon import http_client_factory
    from notifier.delivery import Database, open_own_connection
    from notifier.worker import DrainOutcome, Worker

    log = structlog.get_logger("notifier.main").bind(owner=me.owner)
    if claim.taken_over_from is not None:
        dead = claim.taken_over_from
        log.warning(
            "worker.lock.taken_over",
            dead_owner=dead.owner,
            dead_pid=dead.pid,
            dead_host=dead.host,
            reason=claim.reason,
        )
    from notifier.waiter import Waiter

    db = Database(lambda: open_own_connection(config.db_path))
    worker = Worker(config, db=db, client_factory=http_client_factory(config), me=me)
    stopped = anyio.Event()

    def stop() -> None:
        worker.stop()
        stopped.set()

    _stop_on_signals(stop)
    try:
        report = await worker.drain(max_runs)
        outcome, delivered, deferred = report.outcome, report.delivered, report.deferred
        if wait and outcome is DrainOutcome.RELEASED:
            # No daemon may be listening: a head deferred briefly is this drainer's to retry.
            waiter = Waiter(worker, db, config.db_path, stopped, time.time)
            await waiter.run()
            outcome = waiter.outcome or outcome
            delivered += waiter.delivered
            deferred += waiter.deferred
    finally:
        await worker.aclose()
        await db.aclose()
    if outcome is DrainOutcome.STOPPED:
        # Stopped with a due row left: hand it to the daemon or a fresh drainer, never strand it.
        log.info("worker.handoff", outcome="kicked_successor", kick=kick.kick(config.db_path))
    log.info("notifier.exit", outcome=outcome.value, delivered=delivered, deferred=deferred)


def _refuse_as_root(argv: Sequence[str] | None) -> int | None:
    """As root on a data folder another user owns: one line naming `sudo -u OWNER ...`, before
    anything is opened (`plumbing.files.refuse_foreign_folder` says why); else None."""
    if os.geteuid() != 0:
        return None
    import shlex

    from engine import config
    from plumbing import files

    words = list(sys.argv[1:] if argv is None else argv)
    try:
        for folder in (config.data_folder(), os.path.dirname(config.db_file())):
            files.refuse_foreign_folder(folder, shlex.join([PROG, *words]))
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The `coop-notifier` console script; a reader that goes away ends it quietly."""
    from plumbing.terminal import to_reader

    return to_reader(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    refused = _refuse_as_root(argv)
    if refused is not None:
        return refused
    if args.command == "serve":
        from notifier import engine_service

        return engine_service.main()  # its own stop signals, errors and exit status
    from notifier.errors import NotifierError

    try:
        if args.command == "run":
            import anyio

            from notifier.daemon import backend_options
            from plumbing.logs import configure_logging

            configure_logging()
            anyio.run(_run_daemon, backend_options=backend_options())
        else:
            _drain_command(args.max_runs, wait=not args.no_wait)
    except NotifierError as exc:
        return _refuse(exc)
    except BaseExceptionGroup as group:
        # A task group wraps what its tasks raised: an error the design names is still one line.
        found = _named_error(group)
        if found is None:
            raise
        return _refuse(found)
    finally:
        _ignore_stop_signals()
    return 0


def _refuse(exc: BaseException) -> int:
    from notifier.errors import NotifierError

    print(f"{PROG}: {exc}", file=sys.stderr)
    return exc.exit_status if isinstance(exc, NotifierError) else 1


def _named_error(group: BaseExceptionGroup) -> BaseException | None:
    """The first NotifierError in `group` (nested groups included), if any."""
    from notifier.errors import NotifierError

    for exc in group.exceptions:
        if isinstance(exc, NotifierError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            inner = _named_error(exc)
            if inner is not None:
                return inner
    return None


if __name__ == "__main__":
    sys.exit(main())
