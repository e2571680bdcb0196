"""The `chief` console script: read the conversation, and start the door or the emulator.

    chief --version
    chief log [--limit N] [--json] [--owner NAME]   the conversation as a person reads it
    chief serve ...                                 the notify door (chief.door.app.main)
    chief telegram-emulator ...                     a local Bot API (chief.telegram.emulator.main)

`serve` and `telegram-emulator` are only dispatched from here (their modules are imported when
asked for, so `chief log` never pays for FastAPI). Bad input prints one line on stderr and
exits 2; a runtime failure prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from datetime import datetime
from importlib import metadata
from typing import NoReturn

from chief.model import BADGES, Message

DISTRIBUTION = "coop-notifier"
DEFAULT_LOG_LIMIT = 50
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# Subcommands owned by other modules: name -> module whose main(argv) -> int runs it.
DISPATCHED = {"serve": "chief.door.app", "telegram-emulator": "chief.telegram.emulator"}
LABEL_WIDTH = 9


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (not the usage block) and no exit inside."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {raw!r}")
    return value


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def _parser() -> _Parser:
    parser = _Parser(prog="chief", description="The owner's Master Chief conversation.")
    parser.add_argument(
        "--version", action="version", version=f"chief ({DISTRIBUTION}) {_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    log_cmd = commands.add_parser("log", help="print the conversation, coop and cron lines marked")
    log_cmd.add_argument(
        "--limit", type=_positive_int, default=DEFAULT_LOG_LIMIT, help="last N messages"
    )
    log_cmd.add_argument("--json", action="store_true", help="one JSON object per line")
    log_cmd.add_argument("--owner", help="whose conversation (default: CHIEF_OWNER)")
    commands.add_parser("serve", help="run the notify door (options: chief serve --help)")
    commands.add_parser("telegram-emulator", help="run a local Telegram Bot API emulator")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `chief` console script; returns the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in DISPATCHED:
        return _dispatch(args[0], args[1:])
    try:
        options = _parser().parse_args(args)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version exit through argparse
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if options.command == "log":
        return _log(limit=options.limit, as_json=options.json, owner=options.owner)
    print(f"chief: {options.command} is handled elsewhere", file=sys.stderr)  # pragma: no cover
    return EXIT_USAGE  # pragma: no cover


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
    # Imported here: --version and usage errors need neither anyio nor aiosqlite.
    import anyio

    from chief.config import ChiefConfig
    from chief.conversation import read_log
    from chief.errors import ChiefConfigError, ChiefError, ChiefInputError

    try:
        config = ChiefConfig.from_env()
        messages = anyio.run(lambda: read_log(config, limit=limit, owner=owner))
    except (ChiefConfigError, ChiefInputError) as exc:
        print(f"chief: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ChiefError as exc:
        print(f"chief: {exc}", file=sys.stderr)
        return EXIT_FAILED
    for message in messages:
        print(_json_line(message) if as_json else render_message(message))
    return EXIT_OK


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
    """One message as a person reads it: id, local time, speaker or badge, then the text."""
    head = f"#{message.id:<5} {_local_time(message.created_at)}  {_label(message):<{LABEL_WIDTH}} "
    lines = message.content.splitlines() or [""]
    indent = " " * len(head)
    return "\n".join([head + lines[0], *(indent + line for line in lines[1:])])


def _json_line(message: Message) -> str:
    return json.dumps(
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
