"""The rules and words of the fallback channel (issue 35, rung 3), pure: no store, no clock of
its own, no Apprise.

When Telegram cannot deliver for `after_s` (refused, unreachable, or a send in doubt left
unresolved), the door sends through the fallback channel (Apprise URLs, `chief.fallback`):

    the notice      ONE message per outage: since when, why in words, how many reports wait
    each report     every urgent report still ringing and unacknowledged, once (subject
                    `URGENT: ...`, and how to acknowledge it)
    the allowance   at most `max_per_hour` messages in any hour; the last message an hour
                    allows carries every entry still waiting (a digest), so nothing is lost
                    and nothing floods
    back            when a send through Telegram goes through again, ONE Telegram message
                    lists what went through the fallback meanwhile

Its settings (`chief.fallback.settings` reads them):

    CHIEF_FALLBACK_URLS          unset: no fallback   Apprise URLs, separated by whitespace or
                                                     commas (`mailto://...`, `ntfys://...`)
    CHIEF_FALLBACK_URLS_FILE     unset              a file of this user's alone (0600) holding
                                                     them, for URLs that carry a password
    CHIEF_FALLBACK_AFTER_S       300                how long Telegram fails before rung 3
                                                     (>= 60; CHIEF_TEST_URGENT_SHORT=1 allows
                                                     TEST_MIN_AFTER_S, for the test suite)
    CHIEF_FALLBACK_MAX_PER_HOUR  12                 messages an hour (1..MAX_PER_HOUR_LIMIT)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from chief.answer_rules import cut

DEFAULT_AFTER_S = 300.0
# The sender retries a refused send (403, 401, 400) only at its backoff cap, a minute: a shorter
# delay could not tell a refusal from one unlucky try.
MIN_AFTER_S = 60.0
TEST_MIN_AFTER_S = 1.0
DEFAULT_MAX_PER_HOUR = 12
MAX_PER_HOUR_LIMIT = 120
HOUR_S = 3600.0
# A subject line stays short: mail clients and push services cut longer ones.
TITLE_CHARS = 120
# Words the tests and the owner's mail filters match on: keep them.
URGENT_SUBJECT = "URGENT: "
NOTICE_SUBJECT = "Telegram is down "
POSSIBLE_REPEAT = "(possibly a repeat: the door stopped while sending it)"
# Kinds of fallback entries (chief.store.fallback).
NOTICE, REPORT = "notice", "report"
# What `coop_fallback_sends_total{result}` counts: a message the channel took, one it refused
# or could not reach, and one sent again after the door stopped in its send window.
SENT, FAILED, REPEATED = "sent", "failed", "repeated"
RESULTS = (SENT, FAILED, REPEATED)


@dataclass(frozen=True)
class FallbackSettings:
    """The fallback channel's settings (the module docstring)."""

    #: the Apprise URLs (never logged: they may carry a password)
    urls: tuple[str, ...] = field(repr=False)
    #: where they came from: `CHIEF_FALLBACK_URLS`, or the file's path
    urls_from: str
    after_s: float = DEFAULT_AFTER_S
    max_per_hour: int = DEFAULT_MAX_PER_HOUR
    #: the test-only CHIEF_TEST_URGENT_SHORT allowed a delay below MIN_AFTER_S
    test_short: bool = False


@dataclass(frozen=True)
class Entry:
    """A fallback entry waiting to be sent: its seq, kind, subject and body, whether it is a
    repeat (the door stopped in its send window)."""

    seq: int
    kind: str
    title: str
    body: str
    repeat: bool = False


@dataclass(frozen=True)
class Message:
    """One message through the channel: the entries it carries, its subject and body."""

    seqs: list[int]
    title: str
    body: str


def split_urls(raw: str) -> list[str]:
    """The URLs of a setting or a file: separated by whitespace or commas (Apprise's own
    separators; a comma inside a URL's query is written %2C)."""
    return [part for part in raw.replace(",", " ").split() if part]


def shown_url(url: str) -> str:
    """A URL said in a refusal without what may be secret in it: its scheme alone, plus how
    long it is (`mailto://… (58 characters)`)."""
    scheme, sep, _ = url.partition("://")
    safe = scheme if sep and scheme.isascii() and scheme.isalnum() else "?"
    return f"{safe}://… ({len(url)} characters)"


def carries_password(url: str) -> bool:
    """Whether `url` holds a password in its userinfo (`scheme://user:secret@host`): such a URL
    belongs in CHIEF_FALLBACK_URLS_FILE, not in an environment other processes may read."""
    _, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    userinfo, at, _ = authority.rpartition("@")
    return bool(sep and at and ":" in userinfo)


def clock(at: float) -> str:
    """`2026-12-06 03:41 UTC`: an email is read in any time zone."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def short(text: str, limit: int) -> str:
    """`text` on one line, within `limit` characters (`answer_rules.cut`)."""
    return cut(" ".join(text.split()), limit)


def how_to_acknowledge(number: int) -> str:
    return (
        f'To acknowledge: run `chief ack {number}` on the machine, or tap "Got it" on the '
        "phone once Telegram works again."
    )


def report_message(number: int, report: str, since: float, why: str) -> tuple[str, str]:
    """An urgent report's subject and body (`report`: its text without the urgent mark)."""
    title = short(URGENT_SUBJECT + report, TITLE_CHARS)
    body = (
        f"URGENT report {number}, still ringing and unacknowledged:\n\n{report}\n\n"
        f"Telegram cannot deliver it: failing since {clock(since)} ({why}).\n"
        f"{how_to_acknowledge(number)}"
    )
    return title, body


def notice_message(since: float, why: str, waiting: int, now: float) -> tuple[str, str]:
    """The one message of an outage: since when, why in words, how many reports wait."""
    minutes = max(0, int((now - since) // 60))
    title = f"{NOTICE_SUBJECT}since {clock(since)}"
    body = (
        f"The Coop door cannot deliver through Telegram since {clock(since)} "
        f"({minutes} min): {why}.\n"
        f"{waiting} report(s) wait in its Telegram queue; they ring once Telegram takes them "
        "again. Urgent ones come here too, one message each.\n"
        "`coop status` on the machine says what to do."
    )
    return title, body


def compose(entries: list[Entry]) -> Message:
    """The message carrying `entries`: one alone as it is; several as one digest whose subject
    is the first urgent one's (a digest only ever closes an hour's allowance)."""
    first = entries[0]
    if len(entries) == 1:
        body = f"{POSSIBLE_REPEAT}\n\n{first.body}" if first.repeat else first.body
        return Message([first.seq], first.title, body)
    urgent = [entry for entry in entries if entry.kind == REPORT]
    lead = urgent[0] if urgent else first
    title = short(f"{lead.title} (+{len(entries) - 1} more)", TITLE_CHARS)
    parts = [f"{len(entries)} messages held back by the limit of messages an hour, together:"]
    for index, entry in enumerate(entries, 1):
        mark = f" {POSSIBLE_REPEAT}" if entry.repeat else ""
        parts.append(f"--- {index}. {entry.title}{mark}\n{entry.body}")
    return Message([entry.seq for entry in entries], title, "\n\n".join(parts))


def next_message(waiting: list[Entry], sent_in_hour: int, max_per_hour: int) -> Message | None:
    """What to send now, given how many messages went in the last hour: nothing when the hour
    is spent; the head alone while more than one message is left; every entry waiting as one
    digest in the hour's last message."""
    left = max_per_hour - sent_in_hour
    if not waiting or left <= 0:
        return None
    if left == 1:
        return compose(waiting)
    return compose(waiting[:1])


def back_text(lines: list[str], since: float, now: float) -> str:
    """The Telegram message once Telegram is back: what went through the fallback meanwhile."""
    minutes = max(0, int((now - since) // 60))
    listed = "\n".join(f"- {line}" for line in lines)
    return (
        f"Telegram is back after {minutes} min (failing since {clock(since)}). "
        f"Sent through the fallback channel meanwhile:\n{listed}"
    )
