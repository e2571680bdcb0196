"""How every package reads a setting's number or switch from the environment, written once.

    whole_number(raw)        ASCII digits only ("64", " 64 "): an int, else None
    decimal(raw)             ASCII digits with at most one point ("2.5", ".5", "30"): a float,
                             else None
    switch(raw, words)       exactly one of the documented words (any case, spaces around
                             ignored): its meaning, else None
    words_of(words)          the words, said in a refusal: `on` or `off`
    switch_setting(environ, name, words, default)
                             a switch setting read whole: unset or blank is `default`, an
                             undocumented word raises `SettingRefused` naming it and its words
    LOG_TIMESTAMP_WORDS      `COOP_LOG_TIMESTAMP`'s words, which every package's logging reads

Python's `int()` and `float()` take far more than a setting's documented form: any script's
digits (`CHIEF_URGENT_RERING_S=٣٠` read as 30), underscores (`1_0`), signs, exponents, `inf`
and `nan`. A value that is not what the documentation shows is a mistake to say at start, not a
number to guess. Each package keeps its own bounds and its one-line refusal naming the setting
(its error class); only the reading is here. A switch given an undocumented word (`yes` where
`on`/`off` is documented) is refused the same way, never silently taken as the default.

Standard library only (the `coop` CLI's cold path reads its settings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# [0-9], never \d: \d takes every script's digits.
_WHOLE = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
#: `COOP_LOG_TIMESTAMP` (docs/configuration.md): `off` leaves the time out of console lines.
LOG_TIMESTAMP_WORDS = {"on": True, "off": False}
#: Only these surround a value unnoticed (a trailing newline from an env file, a stray space).
_BLANKS = " \t\r\n"


def whole_number(raw: str) -> int | None:
    """`raw` as a whole number written in ASCII digits (spaces around it ignored), else None."""
    text = raw.strip(_BLANKS)
    return int(text) if _WHOLE.fullmatch(text) else None


def decimal(raw: str) -> float | None:
    """`raw` as a number written in ASCII digits with at most one decimal point (spaces around it
    ignored), else None: no sign, exponent, underscore, `inf` or `nan`."""
    text = raw.strip(_BLANKS)
    return float(text) if _DECIMAL.fullmatch(text) else None


def switch(raw: str, words: dict[str, bool]) -> bool | None:
    """The meaning of `raw` among the documented `words` (any case, spaces around it ignored),
    else None."""
    return words.get(raw.strip(_BLANKS).lower())


def words_of(words: dict[str, bool]) -> str:
    """The documented words as a refusal says them: `on` or `off`."""
    quoted = [f"`{word}`" for word in words]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


class SettingRefused(ValueError):
    """A setting's value is not one its documentation shows; the message names the setting and
    what it takes, in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def switch_setting(
    environ: Mapping[str, str], name: str, words: dict[str, bool], default: bool
) -> bool:
    """The switch `name` in `environ`: unset or blank is `default`; one of `words` its meaning;
    anything else `SettingRefused`."""
    raw = environ.get(name, "")
    if not raw.strip(_BLANKS):
        return default
    value = switch(raw, words)
    if value is None:
        raise SettingRefused(f"{name}={raw!r} must be {words_of(words)}, or unset")
    return value
