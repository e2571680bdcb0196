"""`coop`: the ledger from a shell.

    engine.cli.tree      the command tree as data (each verb's derived from the verb), and the
                         quick parse of a plain line
    engine.cli.parser    the tree in argparse, for --help and one-line usage errors
    engine.cli.commands  one runner for every verb's command, which calls its public function
                         (`engine.api`); a handler for each operator's command
    engine.cli.render    the lines each command prints
    main (here)          parse, dispatch, and print every expected error as one line

Each invocation is a process start, so this package and everything it imports at the top stays
on the standard library and the engine: no httpx, structlog or FastAPI on a verb's path.
Exit statuses, for every command:

    0  done (`status --check`: nothing needs a person); `--help` and `--version` too
    1  refused or failed: a lifecycle refusal, the database or the owner service unusable, a
       folder or file the command needs unusable, `status --check` found something
    2  usage: an unknown command or option, a missing actor, an unknown id, an empty title, a
       missing reason, an argument no command takes (not UTF-8, a NUL, an integer past 64
       bits, a nan or infinite number)
    3  `request wait --timeout S`: S seconds passed and the request is still open
  130  interrupted (Ctrl-C); 143 a `request wait` stopped by SIGTERM. A wait's socket is
       removed on the way out either way
  141  the reader of the output went away (`coop list | head -1`): quietly, no message

Every refusal prints one line on stderr (two when the error has a detail) and changes nothing.
"""

from __future__ import annotations

import os
import sys

from engine.cli.tree import PROG, misnamed, quick_parse, refusal
from engine.errors import CoopError, UsageError
from plumbing.terminal import reader_gone, shown, to_reader

TYPE_CHECKING = False  # mypy reads any `TYPE_CHECKING` as true; `typing` stays unloaded
if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.cli.commands import Args


def _fail(exc: CoopError) -> int:
    """One line with the error's exact words; its detail, if any, on a line of its own (each
    escaped: a refusal may quote what it was given, or a stored title)."""
    print(shown(f"{PROG}: {exc}"), file=sys.stderr)
    if exc.detail:
        print(shown(f"{PROG}: {exc.detail}"), file=sys.stderr)
    return exc.exit_status


def _exec_service() -> int:
    """`coop serve` becomes `python -m notifier serve` (`notifier.engine_service`): the engine
    service embeds the notifier's daemon, and the engine never imports the notifier. Exec, not a
    child: the same pid takes the stop signals honcho and systemd send, and exits with the
    service's status."""
    argv = [sys.executable, "-P", "-m", "notifier", "serve"]
    try:
        os.execv(sys.executable, argv)  # noqa: S606 - our own interpreter, a fixed argv
    except OSError as exc:
        print(
            f"{PROG} serve: cannot start the engine service: {exc.strerror or exc}", file=sys.stderr
        )
    return 1


def _parse(words: list[str]) -> Args:
    """The quick parse of a plain line, else argparse (`--help`, a usage error, the rest)."""
    quick = quick_parse(words)
    if quick is not None:
        return quick
    problem = misnamed(words)
    if problem is not None:
        print(shown(problem), file=sys.stderr)
        raise SystemExit(2)
    from engine.cli.parser import build_parser

    return build_parser(words).parse_args(words)


def _refuse_as_root(args: Args, words: list[str]) -> int | None:
    """As root on a data folder another user owns: one line naming `sudo -u OWNER coop ...`,
    before anything is opened (`plumbing.files.refuse_foreign_folder` says why); else None."""
    if os.geteuid() != 0:
        return None
    import shlex

    from engine import config
    from plumbing import files

    db = getattr(args, "db", None)
    ledger = config.pure_path(os.path.expanduser(db)) if db else config.db_file()
    folders = [config.data_folder(), os.path.dirname(ledger)]
    if args.group in ("backup", "restore"):
        from plumbing.home import chief_db_file

        folders.append(os.path.dirname(chief_db_file()))
    try:
        for folder in folders:
            files.refuse_foreign_folder(folder, shlex.join([PROG, *words]))
    except OSError as exc:
        print(shown(f"{PROG}: {exc}"), file=sys.stderr)
        return 1
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The `coop` console script; a reader that goes away ends it quietly (`to_reader`)."""
    return to_reader(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = _parse(words)
    problem = refusal(args)
    if problem is not None:
        return _fail(UsageError(problem))
    refused = _refuse_as_root(args, words)
    if refused is not None:
        return refused
    if args.group == "serve":
        if getattr(args, "db", None):
            os.environ["COOP_DB"] = args.db
        return _exec_service()
    from engine.cli import commands

    try:
        # The public functions kick the notifier themselves after their commit (engine.api),
        # for the CLI and library callers alike.
        commands.run(args, print)
    except CoopError as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        # Ctrl-C, most likely during `request wait`: its socket is gone by now (a `finally`).
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) and reader_gone():
            raise  # the reader of the output went away: `to_reader` ends quietly
        # A folder or file the command needs (the data folder, the receipts) is not usable.
        where = f": {exc.filename}" if exc.filename else ""
        print(shown(f"{PROG}: {exc.strerror or exc}{where}"), file=sys.stderr)
        return 1
    return 0
