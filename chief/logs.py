"""Structured logging for the chief entry points: one structlog event per line on stderr.

JSON when stderr is not a terminal (production, systemd, tests), key=value console output on a
tty; `COOP_LOG_FORMAT=json|console` forces either, and `COOP_LOG_TIMESTAMP=off` leaves the time
out of console lines (`ops/run` sets both when its output is a terminal: honcho stamps each line
itself). Library code only calls `structlog.get_logger(...)`; entry points call
`configure_logging()`.

`configure_logging` is the twin of `notifier.logs.configure_logging` (chief must not import the
notifier): `tests/contract/test_logging_twins.py` fails if their code ever differs.
"""

from __future__ import annotations

import logging
import os
import sys

import structlog

from plumbing import settings


def configure_logging(json: bool | None = None) -> None:
    """Configure structlog for this process; calling it again just applies the same setup again.

    `json=None` follows `COOP_LOG_FORMAT` (`json` or `console`; anything else counts as unset:
    a log setting never stops a service), else picks JSON unless stderr is a terminal.
    """
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
        # terminal escaped, never acted on (chief.terminal's rule; JSON escapes it already).
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
