"""The fallback channel's settings, read once at start (`chief.fallback_rules` lists them).

Each wrong one raises `DoorError` with one line naming it, and `chief serve` stops before it
binds anything: both URL settings set; a URL file that cannot be read, is another user's or
readable by others (its URLs may carry a password), or is empty; a URL Apprise does not take
(said without its secrets); Apprise not installed; a delay below its floor; an hourly bound out
of range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from chief.errors import DoorError
from chief.fallback_rules import (
    DEFAULT_AFTER_S,
    DEFAULT_MAX_PER_HOUR,
    MAX_PER_HOUR_LIMIT,
    MIN_AFTER_S,
    TEST_MIN_AFTER_S,
    FallbackSettings,
    split_urls,
)
from chief.urgent_rules import TEST_SETTING
from plumbing import files, settings
from plumbing.keyfile import read_key

URLS = "CHIEF_FALLBACK_URLS"
URLS_FILE = "CHIEF_FALLBACK_URLS_FILE"
AFTER = "CHIEF_FALLBACK_AFTER_S"
MAX_PER_HOUR = "CHIEF_FALLBACK_MAX_PER_HOUR"


def from_env(env: Mapping[str, str], *, test_short: bool) -> FallbackSettings | None:
    """The fallback's settings, None when neither URL setting is set (the other settings are
    checked all the same: a wrong one is a mistake whether or not it is used yet)."""
    after_s = _after_s(env, test_short)
    max_per_hour = _max_per_hour(env)
    urls, urls_from = _urls(env)
    if not urls:
        return None
    from chief.fallback.channel import check_urls  # imports Apprise: only when set

    check_urls(urls, urls_from)
    return FallbackSettings(tuple(urls), urls_from, after_s, max_per_hour, test_short)


def _urls(env: Mapping[str, str]) -> tuple[list[str], str]:
    raw = env.get(URLS, "").strip()
    path = env.get(URLS_FILE, "").strip()
    if raw and path:
        raise DoorError(
            f"{URLS} and {URLS_FILE} are both set; set one: the file when the URLs carry a password"
        )
    if not path:
        return split_urls(raw), URLS
    try:
        text = read_key(path, URLS_FILE)
    except files.NotPrivate as exc:
        raise DoorError(f"{exc} (its URLs may carry a password)") from None
    except (OSError, ValueError) as exc:
        raise DoorError(str(exc)) from None
    return split_urls(text), path


def _after_s(env: Mapping[str, str], test_short: bool) -> float:
    raw = env.get(AFTER, "").strip()
    if not raw:
        return DEFAULT_AFTER_S
    read = settings.decimal(raw)
    value = math.nan if read is None else read
    floor = TEST_MIN_AFTER_S if test_short else MIN_AFTER_S
    if not math.isfinite(value) or value < floor:
        raise DoorError(
            f"{AFTER}={raw!r} must be a number of seconds of at least {MIN_AFTER_S:g} (the "
            f"Telegram sender retries a refused send once a minute; the test-only "
            f"{TEST_SETTING}=1 allows {TEST_MIN_AFTER_S:g} s)"
        )
    return value


def _max_per_hour(env: Mapping[str, str]) -> int:
    raw = env.get(MAX_PER_HOUR, "").strip()
    if not raw:
        return DEFAULT_MAX_PER_HOUR
    value = settings.whole_number(raw) or 0
    if not 1 <= value <= MAX_PER_HOUR_LIMIT:
        raise DoorError(
            f"{MAX_PER_HOUR}={raw!r} must be a whole number of messages in "
            f"1..{MAX_PER_HOUR_LIMIT} (default {DEFAULT_MAX_PER_HOUR})"
        )
    return value
