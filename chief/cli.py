"""The `chief` console script: read the conversation, and start the door or the emulator.

    chief --version
    chief log [--limit N] [--json] [--owner NAME]   the conversation as a person reads it
    chief report --source cron:NAME [--fire ID] [--wait S] TEXT|-
                                                    a scheduled job's line into the Chief
    chief telegram pair [--timeout S] [--second]    pair the owner's Telegram chat by a code
                                                    (--second: the second person's, rung 2 of
                                                    an urgent report's ladder)
    chief telegram unpair [--second]                forget that pairing
    chief ack N                                     acknowledge the urgent report N on the
                                                    machine (the running door stops every rung)
    chief check-backup FILE                         check a chief.db from a backup against
                                                    this build's migrations (`coop restore
                                                    --with-chief` runs it)
    chief serve ...                                 the notify door (chief.serve_cli.main)
    chief telegram-emulator ...                     a local Bot API (chief.telegram.emulator.main)

`serve` and `telegram-emulator` are only dispatched from here (their modules are imported when
asked for, so `chief log` never pays for FastAPI). Bad input prints one line on stderr and
exits 2 (an argument that is not UTF-8 text or holds a NUL too, named by its option: Python
hands argv bytes that are not UTF-8 over as lone surrogates); a runtime failure prints one line
and exits 1; Ctrl-C during `telegram pair` prints one line and exits 130, nothing paired; a
reader of the output that goes away (`chief log | head -1`) ends it quietly with 141.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import sys
from datetime import datetime
from importlib import metadata
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from chief.args import OneLineParser
from chief.errors import ChiefInputError
from chief.model import BADGES, Message
from plumbing.terminal import shown, shown_json, to_reader

if TYPE_CHECKING:
    from chief.cron import CronOutcome

DISTRIBUTION = "coop-notifier"
DEFAULT_LOG_LIMIT = 50
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Subcommands owned by other modules: name -> module whose main(argv) -> int runs it.
DISPATCHED = {"serve": "chief.serve_cli", "telegram-emulator": "chief.telegram.emulator"}
LABEL_WIDTH = 9
#: chief.db's integers are SQLite's: a count past 64 bits cannot reach a query.
MAX_WHOLE_NUMBER = 2**63 - 1
#: A line read from stdin is read up to its limit in bytes (4 per character at most) and one
#: byte more, never further: `chief report -` with 200 MB on stdin held 409 MB before refusing.
UTF8_MAX_BYTES_PER_CHAR = 4
#: How long `chief telegram pair` waits for the owner's `/start CODE`, and the most it may.
DEFAULT_PAIR_TIMEOUT_S = 600.0
MAX_PAIR_TIMEOUT_S = 3600.0
#: Command groups (a word before a command's own, as `telegram` in `chief telegram pair`).
GROUP_HELP = {"telegram": "pair the owner's Telegram chat, or forget the pairing"}


class _Parser(OneLineParser):
    """argparse, but a usage error is one line (not the usage block) and no exit inside. It
    points at the `--help` of the command the line names (`helps`): argparse reports an
    unrecognized option at the top level whatever command it followed."""

    helps: str | None = None

    def error(self, message: str) -> NoReturn:
        raise ChiefInputError(f"{self.prog}: {message} (see {self.helps or self.prog} --help)")


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_WHOLE_NUMBER:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_WHOLE_NUMBER}, got {raw!r}"
        )
    return value


def _pair_timeout(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 1 <= value <= MAX_PAIR_TIMEOUT_S:  # false for nan
        raise argparse.ArgumentTypeError(
            f"expected seconds from 1 to {MAX_PAIR_TIMEOUT_S:g}, got {raw!r}"
        )
    return value


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


#: One argument: its names and `add_argument`'s keyword arguments.
Arg = tuple[tuple[str, ...], dict[str, Any]]


class Command(NamedTuple):
    """A command `chief` parses itself: its help line, description and arguments."""

    help: str
    args: tuple[Arg, ...]
    description: str | None = None


#: The commands parsed here, as data: the parser is built from it, and the argv fuzz
#: (tests/fuzz/test_argv_fuzz.py) draws every argument of every command from it. A name of two
#: words is a command in a group (`GROUP_HELP`). The commands in `DISPATCHED` parse their own
#: arguments.
COMMANDS: dict[str, Command] = {
    "log": Command(
        "print the conversation, coop and cron lines marked",
        (
            (
                ("--limit",),
                {"type": _positive_int, "default": DEFAULT_LOG_LIMIT, "help": "last N messages"},
            ),
            (("--json",), {"action": "store_true", "help": "one JSON object per line"}),
            (("--owner",), {"help": "whose conversation (default: CHIEF_OWNER)"}),
        ),
    ),
    "report": Command(
        "land a scheduled job's line in the Master Chief (once per source and fire)",
        (
            (("--source",), {"required": True, "help": "cron:NAME, the job's name"}),
            (
                ("--fire",),
                {
                    "help": "this run's fire id (e.g. its scheduled time); a re-run writes"
                    " nothing new"
                },
            ),
            (
                ("--wait",),
                {
                    "default": "5",
                    "metavar": "S",
                    "help": "seconds to wait for the line to land (5)",
                },
            ),
            (("text",), {"metavar": "TEXT", "help": "the line; - reads it from stdin"}),
        ),
        description="Land a scheduled job's line in the Master Chief, once per --source and "
        "--fire: durable first, then landed under the conversation's turn lock (by the running "
        "door, or by this command when none runs). Past --wait the line is queued and lands "
        "when the Chief is free (exit 0). No Telegram message.",
    ),
    "telegram pair": Command(
        "pair the owner's Telegram chat: send the bot /start CODE",
        (
            (
                ("--timeout",),
                {
                    "type": _pair_timeout,
                    "default": DEFAULT_PAIR_TIMEOUT_S,
                    "metavar": "S",
                    "help": f"seconds to wait for /start CODE ({DEFAULT_PAIR_TIMEOUT_S:g})",
                },
            ),
            (
                ("--second",),
                {
                    "action": "store_true",
                    "help": "pair the second person: their own chat, rung when nobody "
                    "acknowledges an urgent report in time",
                },
            ),
        ),
        description="Check TELEGRAM_BOT_TOKEN, print the bot's @name and a one-time code, and "
        "wait for /start CODE in a private chat with the bot; then store that chat and that "
        "user (0600, in the data folder) and answer in the chat. Stop the door first: "
        "Telegram lets one reader take the bot's updates. TELEGRAM_CHAT_ID, where set, still "
        "wins over the pairing.",
    ),
    "telegram unpair": Command(
        "forget the Telegram pairing (the door rings nothing until you pair again)",
        (
            (
                ("--second",),
                {"action": "store_true", "help": "forget the second person's pairing only"},
            ),
        ),
    ),
    "ack": Command(
        "acknowledge an urgent report on the machine: every rung stops",
        ((("report",), {"metavar": "N", "help": "the report's number (`coop status`)"}),),
        description="Acknowledge the urgent report N (its number in the door's status, "
        "`coop status` and the phone's /status) through the running door: it stops ringing "
        "on every rung, each message still ringing says so, and the Chief gets one line. "
        "Exit 0 acknowledged (or already), 1 no such report or no door running.",
    ),
    "check-backup": Command(
        "check a chief.db from a backup against this build's migrations",
        ((("file",), {"metavar": "FILE", "help": "the chief.db to check"}),),
        description="Check FILE, a chief.db from a backup, before it is restored: read-only, "
        "its schema exactly the one this build's migrations make at its version (no newer), "
        "then its integrity. Prints what it found, or one line saying the first thing wrong "
        "(exit 1). `coop restore --with-chief` runs it.",
    ),
}
DISPATCHED_HELP = {
    "serve": "run the notify door (options: chief serve --help)",
    "telegram-emulator": "run a local Telegram Bot API emulator",
}


def _parser() -> _Parser:
    parser = _Parser(prog="chief", description="The owner's Master Chief conversation.")
    parser.add_argument(
        "--version", action="version", version=f"chief ({DISTRIBUTION}) {_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups: dict[str, Any] = {}
    for name, command in COMMANDS.items():
        *group, word = name.split()
        where = commands
        if group:
            if group[0] not in groups:
                head = commands.add_parser(group[0], help=GROUP_HELP[group[0]])
                groups[group[0]] = head.add_subparsers(
                    dest="subcommand", required=True, metavar="COMMAND"
                )
            where = groups[group[0]]
        sub = where.add_parser(word, help=command.help, description=command.description)
        for names, settings in command.args:
            sub.add_argument(*names, **settings)
    for name in DISPATCHED:
        commands.add_parser(name, help=DISPATCHED_HELP[name])
    return parser


def _named(args: list[str]) -> tuple[list[str], list[str]]:
    """The command words `args` starts with (`log`, `telegram pair`), and the names that could
    come next where they stop short (the commands, or a group's)."""
    heads = [name.split() for name in [*COMMANDS, *DISPATCHED]]
    taken: list[str] = []
    for word in args:
        following = [head[len(taken)] for head in heads if head[: len(taken)] == taken]
        if word not in following:
            return taken, list(dict.fromkeys(following))
        taken.append(word)
        if taken in heads:
            return taken, []
    return taken, list(
        dict.fromkeys(head[len(taken)] for head in heads if head[: len(taken)] == taken)
    )


def _misnamed(args: list[str]) -> str | None:
    """The one-line usage error for a line that names no command, or a word where a command
    goes that is none, with the closest names (`difflib`); None for any other line."""
    taken, following = _named(args)
    if not following:
        return None
    prog = " ".join(["chief", *taken])
    if len(args) == len(taken):
        return f"{prog}: name a command: {', '.join(following)} (see {prog} --help)"
    typed = args[len(taken)]
    if typed.startswith("-"):
        return None
    close = difflib.get_close_matches(typed, following, n=3, cutoff=0.6)
    hint = (
        f"did you mean {' or '.join(close)}?"
        if close
        else f"the commands are {', '.join(following)}"
    )
    return f"{prog}: no command {typed!r}; {hint} (see {prog} --help)"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `chief` console script; returns the exit status. A reader that goes
    away ends it quietly (`plumbing.terminal.to_reader`)."""
    return to_reader(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    refused = _refuse_as_root(args)
    if refused is not None:
        return refused
    if args and args[0] in DISPATCHED:
        return _dispatch(args[0], args[1:])
    problem = _misnamed(args)
    if problem is not None:
        print(shown(problem), file=sys.stderr)
        return EXIT_USAGE
    parser = _parser()
    parser.helps = " ".join(["chief", *_named(args)[0]])
    try:
        # TEXT is `chief report`'s own to refuse (check_cron_text), as it is from stdin.
        options = parser.checked(parser.parse_args(args), own_words={"text"})
    except ChiefInputError as exc:
        print(shown(str(exc)), file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if options.command == "log":
        return _log(limit=options.limit, as_json=options.json, owner=options.owner)
    if options.command == "report":
        return _report(options.source, options.fire, options.wait, options.text)
    if options.command == "check-backup":
        return _check_backup(options.file)
    if options.command == "telegram":
        from chief import pair_cli  # PTB and anyio load for this command only

        if options.subcommand == "pair":
            return pair_cli.pair(options.timeout, second=options.second)
        return pair_cli.unpair(second=options.second)
    if options.command == "ack":
        from chief.ack_cli import ack  # the door's client loads for this command only

        return ack(options.report)
    print(f"chief: {options.command} is handled elsewhere", file=sys.stderr)  # pragma: no cover
    return EXIT_USAGE  # pragma: no cover


def _refuse_as_root(args: list[str]) -> int | None:
    """As root on a data folder another user owns (chief.db's, or the door's): one line naming
    `sudo -u OWNER chief ...`, before anything is opened (`plumbing.files.refuse_foreign_folder`
    says why); else None. The emulator, a test double outside the data folder, is exempt."""
    if os.geteuid() != 0 or args[:1] == ["telegram-emulator"] or not set(args) - {"--help", "-h"}:
        return None
    import shlex

    from chief.config import ChiefConfig
    from chief.door.config import data_home
    from chief.errors import ChiefError
    from plumbing import files

    try:
        folders = [data_home(os.environ), ChiefConfig.from_env(os.environ).db_path.parent]
    except ChiefError:
        return None  # the command itself says what is wrong with the setting
    try:
        for folder in folders:
            files.refuse_foreign_folder(folder, shlex.join(["chief", *args]))
    except OSError as exc:
        print(shown(f"chief: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    return None


def _dispatch(command: str, rest: list[str]) -> int:
    module_name = DISPATCHED[command]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise  # a dependency of the module is missing: that is a real error
        print(f"chief: `{command}` is not available in this install", file=sys.stderr)
        return EXIT_USAGE
    return int(module.main(rest))


def _log(*, limit: int, as_json: bool, owner: str | None) -> int:
    # Imported here: --version and usage errors need neither anyio nor the store.
    import anyio

    from chief.config import ChiefConfig
    from chief.conversation import read_log
    from chief.errors import ChiefError

    try:
        config = ChiefConfig.from_env()
        messages = anyio.run(lambda: read_log(config, limit=limit, owner=owner))
    except ChiefError as exc:
        return _failed("chief", exc)
    for message in messages:
        print(_json_line(message) if as_json else render_message(message))
    if not messages and not as_json:
        print("no messages yet")  # said, so an empty log is not taken for a hung command
    return EXIT_OK


def _check_backup(path: str) -> int:
    from chief.store.reference import check_backup

    try:
        version = check_backup(path)
    except ValueError as exc:
        print(shown(f"chief: {path}: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    print(shown(f"{path}: chief.db at schema version {version}, its schema this build's, whole"))
    return EXIT_OK


def _failed(prefix: str, exc: Exception) -> int:
    """Print the error's one line; exit 2 for a wrong setting or input, 1 for anything else."""
    from chief.errors import ChiefConfigError

    print(shown(f"{prefix}: {exc}"), file=sys.stderr)
    return EXIT_USAGE if isinstance(exc, ChiefConfigError | ChiefInputError) else EXIT_FAILED


def _report(source: str, fire: str | None, raw_wait: str, raw_text: str) -> int:
    import anyio

    from chief.config import ChiefConfig
    from chief.cron import check_cron_text, check_wait, cron_source_id, report_from_cron
    from chief.errors import ChiefConfigError, ChiefError, ChiefInputError
    from plumbing.wire import MAX_TEXT_CHARS

    try:
        source_id = cron_source_id(source, fire)
        wait_s = check_wait(raw_wait)
        text = _stdin_text(MAX_TEXT_CHARS) if raw_text == "-" else raw_text
        check_cron_text(text)
        config = ChiefConfig.from_env()
        from chief.door_address import door_address

        door = door_address()
    except (ChiefConfigError, ChiefInputError) as exc:
        return _failed("chief report", exc)
    _quiet_logs()
    try:
        outcome = anyio.run(
            lambda: report_from_cron(config, source_id, text, wait_s=wait_s, door=door)
        )
    except ChiefError as exc:
        return _failed("chief report", exc)
    return _said(outcome)


def _said(outcome: CronOutcome) -> int:
    """Print what became of a cron line, one line (stderr when it cannot land by itself), and
    answer the exit status."""
    key = outcome.source_key
    if outcome.how == "already":
        print(
            shown(
                f"chief report: {key} already landed as message #{outcome.message_id}; nothing new"
            )
        )
    elif outcome.how == "landed":
        print(
            shown(f"chief report: landed as message #{outcome.message_id} ({key}, by {outcome.by})")
        )
    elif outcome.how == "refused":
        # Durable, but a misconfiguration (the key, the posture) to fix: it lands only with the
        # door's next report or its next start.
        print(
            shown(
                f"chief report: queued as {key}, but {outcome.note}; it lands with the door's "
                "next report or restart — check COOP_SERVICE_KEY_FILE and the posture"
            ),
            file=sys.stderr,
        )
        return EXIT_FAILED
    elif outcome.how == "unreachable":
        # Durable, but it cannot land by itself: the cause, named, and a failed exit for cron.
        print(
            shown(
                f"chief report: queued as {key}, but {outcome.note}; it lands with the door's "
                "next report or restart"
            ),
            file=sys.stderr,
        )
        return EXIT_FAILED
    else:
        print(
            shown(
                f"chief report: queued as {key}; the Chief is busy, so the line will land when it "
                "is free"
            )
        )
    return EXIT_OK


def _stdin_text(max_chars: int) -> str:
    """The line on stdin, read no further than `max_chars` can take in UTF-8 and one byte more:
    a longer one is refused without reading the rest (ChiefInputError)."""
    from chief.errors import ChiefInputError

    stream = sys.stdin
    if stream is None:
        raise ChiefInputError("stdin is closed — pass the line as TEXT, or pipe it in")
    limit = max_chars * UTF8_MAX_BYTES_PER_CHAR
    binary = getattr(stream, "buffer", None)
    if binary is None:  # a text stream an in-process caller put there: one character too many
        return str(stream.read(max_chars + 1))  # is refused by check_cron_text
    raw = binary.read(limit + 1)
    if len(raw) > limit:
        raise ChiefInputError(
            f"report text on stdin is over {max_chars} characters ({limit} bytes); "
            f"at most {max_chars} — shorten it"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ChiefInputError("report text on stdin is not valid UTF-8 — send UTF-8 text") from exc


def _quiet_logs() -> None:
    """Warnings and errors only, on stderr: cron mails whatever a job prints there, and a line
    that landed is said once, on stdout."""
    import logging

    import structlog

    from plumbing.logs import configure_logging

    configure_logging()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def _label(message: Message) -> str:
    # Coop and cron lines get a badge where a chat line has its speaker: they are system lines
    # reporting work, not the assistant's own turn.
    return BADGES.get(message.turn_kind, "") or message.role


def _local_time(created_at: str) -> str:
    try:
        return datetime.fromisoformat(created_at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return created_at


def render_message(message: Message) -> str:
    """One message as a person reads it: id, local time, speaker or badge, then the text, its
    lines indented under the first. Only a newline starts a line; every other control in it (a
    CR, ESC, a C1 or bidi control) is shown escaped (`plumbing.terminal`)."""
    head = f"#{message.id:<5} {_local_time(message.created_at)}  {_label(message):<{LABEL_WIDTH}} "
    first, *rest = (message.content or "—").split("\n")
    indent = " " * len(head)
    return "\n".join([shown(head + first), *(indent + shown(line) for line in rest)])


def _json_line(message: Message) -> str:
    """One message as a JSON line: exact (`json.loads` gives its text back), and nothing in it
    a terminal acts on (`plumbing.terminal.shown_json`)."""
    return shown_json(
        json.dumps(
            {
                "id": message.id,
                "role": message.role,
                "turn_kind": message.turn_kind,
                "badge": BADGES.get(message.turn_kind, "") or None,
                "origin": message.origin,
                "external_request_id": message.external_request_id,
                "created_at": message.created_at,
                "content": message.content,
            },
            ensure_ascii=False,
        )
    )
