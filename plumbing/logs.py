"""Structured logging for every service and entry point (`coop serve`, `coop-notifier`, `chief
serve`, `chief report`, the emulator): one structlog event per line on stderr.

JSON when stderr is not a terminal (production, systemd, the kick-spawned drainer's log file,
tests), key=value console output on a tty; `COOP_LOG_FORMAT=json|console` forces either and
`COOP_LOG_TIMESTAMP=off` leaves the time out of console lines (`ops/run` on a terminal, where
honcho stamps each line). Library modules only call `structlog.get_logger(...)`; entry points
call `configure_logging()`.

`emit_plain` writes one line of the same JSON shape with the standard library alone: a kicked
drainer that loses the worker lock (most of them, under a burst) logs why and exits without
importing structlog, whose import costs ~200 ms on this machine (more than the rest of the
drainer's start). structlog is imported inside `configure_logging` for that reason.
"""

from __future__ import annotations

import json as jsonlib
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from plumbing import settings


def emit_plain(event: str, level: str = "info", **fields: Any) -> None:
    """One JSON log line on stderr, shaped like the structlog output, without structlog."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    line = {**fields, "event": event, "level": level, "timestamp": stamp}
    # One write, text and newline together (see configure_logging).
    sys.stderr.write(jsonlib.dumps(line, default=str) + "\n")
    sys.stderr.flush()


def configure_logging(json: bool | None = None) -> None:
    """Configure structlog for this process; calling it again just applies the same setup again.

    `json=None` follows `COOP_LOG_FORMAT` (`json` or `console`; anything else counts as unset:
    a log setting never stops a service), else picks JSON unless stderr is a terminal.
    """
    import structlog

    forced = os.environ.get("COOP_LOG_FORMAT", "").strip().lower()
    if json is None:
        json = forced == "json" if forced in ("json", "console") else not sys.stderr.isatty()
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
    ]
    # Under `ops/run` on a terminal honcho stamps each line itself: one time per line, not two.
    # A switch given an undocumented word (`yes`) is refused at start, never taken as `on`.
    try:
        stamped = settings.switch_setting(
            os.environ, "COOP_LOG_TIMESTAMP", settings.LOG_TIMESTAMP_WORDS, default=True
        )
    except settings.SettingRefused as exc:
        sys.stderr.write(f"{exc.message}\n")
        raise SystemExit(2) from None
    if json or stamped:
        processors.append(structlog.processors.TimeStamper(fmt="iso", utc=True))
    processors.append(structlog.processors.StackInfoRenderer())
    if json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        # The console renderer formats exceptions itself (and warns if format_exc_info ran first).
        # repr: a value holding outside text (a title, an error a server wrote) reaches the
        # terminal escaped, never acted on (`plumbing.terminal`'s rule; JSON escapes it already).
        processors.append(structlog.dev.ConsoleRenderer(colors=True, repr_native_str=True))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        # One write per line (text and newline together): print() writes them apart when stderr
        # is unbuffered, and another process sharing the stream splices its line in between.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        # Not cached: structlog.testing.capture_logs must still see loggers made before it ran.
        cache_logger_on_first_use=False,
    )
