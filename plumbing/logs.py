"""Structured logging for every service and entry point (`coop serve`, `coop-notifier`, `chief
serve`, `chief report`, the emulator): one structlog event per line on stderr.

JSON when stderr is not a terminal (production, systemd, the kick-spawned drainer's log file,
tests), key=value console output on a tty; `COOP_LOG_FORMAT=json|console` forces either and
`COOP_LOG_TIMESTAMP=off` leaves the time out of console lines (`ops/run` on a terminal, where
honcho stamps each line). Library modules only call `structlog.get_logger(...)`; entry points
call `configure_logging()`.

On the console a value reads as a person writes it, never as a Python literal: a plain word as it
is (`host=127.0.0.1`, `telegram_configured=yes`), a text with a space, `=`, a quote, a backslash
or a control character in double quotes with those escaped (`hint="set CHIEF_OWNER and
restart"`), nothing as `-`, a list as its items joined by commas (`delivery_keys=d-1,d-2`), so
each line is one line that splits into its fields without doubt (`readable`). JSON keeps the
values as they are.

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
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from plumbing import settings
from plumbing.terminal import shown

#: Characters that end a bare value or make it read as something else: written in quotes.
_NOT_BARE = frozenset(' ="\\')


def emit_plain(event: str, level: str = "info", **fields: Any) -> None:
    """One JSON log line on stderr, shaped like the structlog output, without structlog."""
    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    line = {**fields, "event": event, "level": level, "timestamp": stamp}
    # One write, text and newline together (see configure_logging).
    sys.stderr.write(jsonlib.dumps(line, default=str) + "\n")
    sys.stderr.flush()


def readable(value: object) -> str:
    """`value` as one console field's value (see the module docstring): one line, no Python
    quotes, brackets or literals, and split from the next field without doubt."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        pairs = [f"{_item(key)}:{_item(item)}" for key, item in value.items()]
        return _field(",".join(pairs)) if pairs else "-"
    if isinstance(value, list | tuple | set | frozenset):
        return _field(",".join(_item(item) for item in value)) if value else "-"
    return _field(str(value))


def _item(value: object) -> str:
    """One item of a list or a mapping: quoted as well when it holds a comma or a colon, which
    would read as two items or as a key."""
    if value is None or isinstance(value, bool | int | float):
        return readable(value)
    nested = isinstance(value, Mapping | list | tuple | set | frozenset)
    return _field(readable(value) if nested else str(value), also=",:")


def _field(text: str, also: str = "") -> str:
    """`text` as it is when it is a plain word, else in double quotes: a backslash and a quote
    escaped, then every character a terminal would act on spelled as its escape
    (`plumbing.terminal`)."""
    if text and text.isprintable() and not _NOT_BARE.union(also).intersection(text):
        return text
    return '"' + shown(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


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
        processors.append(_console_renderer(structlog))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        # One write per line (text and newline together): print() writes them apart when stderr
        # is unbuffered, and another process sharing the stream splices its line in between.
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        # Not cached: structlog.testing.capture_logs must still see loggers made before it ran.
        cache_logger_on_first_use=False,
    )


def _console_renderer(structlog: Any) -> Any:
    """structlog's console renderer, its values written by `readable` (its public `columns`:
    the default column's formatter given our repr). A value holding outside text (a title, an
    error a server wrote) reaches the terminal escaped, never acted on (`plumbing.terminal`'s
    rule; JSON escapes it already)."""
    dev = structlog.dev
    renderer = dev.ConsoleRenderer(colors=True)
    styles = dev.ConsoleRenderer.get_default_column_styles(colors=True)
    values = dev.KeyValueColumnFormatter(
        key_style=styles.kv_key,
        value_style=styles.kv_value,
        reset_style=styles.reset,
        value_repr=readable,
        width=0,
    )
    renderer.columns = [dev.Column("", values), *(c for c in renderer.columns if c.key)]
    return renderer
