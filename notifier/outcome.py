"""What one delivery attempt came to: pure, no I/O, no clock of its own.

The door's contract: a 2xx with a JSON object body means delivered. Everything else — a
timeout, a refused connection, a 503 (`notification_channel_unavailable`, maybe with
`Retry-After`), any other status, a malformed answer — is a deferral: the row keeps its place
at the head of the queue and is tried again after

    delay = max(backoff(attempt), Retry-After)

where backoff doubles from `base_s` per attempt up to `max_s`, with "equal jitter": the delay
is drawn from [cap/2, cap], so a fleet of retries spreads out but never collapses to a hot
loop against a door that is down.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# `last_error` is one line an operator reads in `coop status`; the door's answer is a record,
# not a dump.
MAX_ERROR_CHARS = 300
MAX_ANSWER_CHARS = 2000
# A Retry-After beyond a day is honoured as a day: the operator can `coop outbox retry` sooner.
MAX_RETRY_AFTER_S = 86_400.0


@dataclass(frozen=True)
class DoorReply:
    """What came back from one POST: a status and body, or `error` when no answer came."""

    status: int | None = None
    body: bytes = b""
    retry_after: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Delivered:
    answer: str


@dataclass(frozen=True)
class Deferred:
    error: str
    retry_in_s: float
    answer: str | None = None


Outcome = Delivered | Deferred


@dataclass(frozen=True)
class BackoffPolicy:
    base_s: float
    max_s: float


def backoff_s(attempt: int, policy: BackoffPolicy, rand: float) -> float:
    """Delay after the `attempt`-th failed attempt (1-based); `rand` in [0, 1) is the jitter."""
    exponent = min(max(attempt, 1) - 1, 63)  # 2**63 s is past any cap; avoid float overflow
    cap = min(policy.max_s, policy.base_s * math.pow(2.0, exponent))
    return cap / 2 + cap / 2 * rand


def parse_retry_after(value: str | None, now_epoch: float) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date), or None."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        from email.utils import parsedate_to_datetime  # rare: most doors send seconds

        try:
            seconds = parsedate_to_datetime(text).timestamp() - now_epoch
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def classify(
    reply: DoorReply, *, attempt: int, policy: BackoffPolicy, now_epoch: float, rand: float
) -> Outcome:
    """Map one reply to delivered or deferred (with its delay)."""
    if reply.status is not None and 200 <= reply.status < 300:
        answer = _json_object(reply.body)
        if answer is not None:
            return Delivered(answer=answer)
        return _deferred(
            f"HTTP {reply.status} with a malformed answer (not a JSON object):"
            f" {_body_text(reply.body)!r}",
            None,
            attempt=attempt,
            policy=policy,
            now_epoch=now_epoch,
            rand=rand,
        )
    if reply.status is None:
        error = reply.error or "no answer from the door"
        return _deferred(
            error, None, attempt=attempt, policy=policy, now_epoch=now_epoch, rand=rand
        )
    body = _body_text(reply.body)
    error = f"HTTP {reply.status}" + (f": {_detail(body)}" if body else "")
    return _deferred(
        error,
        reply.retry_after,
        attempt=attempt,
        policy=policy,
        now_epoch=now_epoch,
        rand=rand,
        answer=one_line(body, MAX_ANSWER_CHARS) if body else None,
    )


def _deferred(
    error: str,
    retry_after: str | None,
    *,
    attempt: int,
    policy: BackoffPolicy,
    now_epoch: float,
    rand: float,
    answer: str | None = None,
) -> Deferred:
    delay = backoff_s(attempt, policy, rand)
    asked = parse_retry_after(retry_after, now_epoch)
    if asked is not None:
        delay = max(delay, asked)
        error = f"{error} (Retry-After {retry_after.strip() if retry_after else ''})"
    return Deferred(error=one_line(error), retry_in_s=delay, answer=answer)


def _json_object(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict):
        return None
    text = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= MAX_ANSWER_CHARS else text[: MAX_ANSWER_CHARS - 1] + "…"


def _body_text(body: bytes) -> str:
    return one_line(body[: MAX_ANSWER_CHARS * 2].decode("utf-8", errors="replace"), 200)


def _detail(body: str) -> str:
    """The door's `detail` when it sent one (`notification_channel_unavailable`), else the body."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    if isinstance(parsed, dict) and "detail" in parsed:
        return one_line(str(parsed["detail"]), 200)
    return body


class BatchRow(Protocol):
    """One row of a batch, as `classify_batch` needs it (the queue's head rows are)."""

    @property
    def id(self) -> int: ...

    @property
    def attempts(self) -> int: ...

    @property
    def delivery_key(self) -> str: ...


def classify_batch(
    reply: DoorReply,
    rows: Sequence[BatchRow],
    *,
    policy: BackoffPolicy,
    now_epoch: float,
    rand: float,
) -> list[Outcome]:
    """Map one batch reply to the outcomes to record, in row order; the rows after the last
    outcome stay pending, untouched (FIFO: a deferred row holds the rows behind it).

    A request that failed whole (no answer, a status other than 2xx, an answer that is not
    `{"items": [...]}`) defers the head row alone, as a single POST's failure would. A 2xx
    answer marks each row whose own answer is a delivered one, in order, up to the first row
    that is not: that row is deferred and the rest are left as they were. (The caller has
    handled a 404 already: the door lacks the route.)"""
    head = rows[0]
    if reply.status is None or not 200 <= reply.status < 300:
        return [
            classify(
                reply, attempt=head.attempts + 1, policy=policy, now_epoch=now_epoch, rand=rand
            )
        ]
    items = _batch_items(reply.body)
    if items is None:
        return [
            _deferred(
                f"HTTP {reply.status} with a malformed batch answer (not {{items: [...]}}):"
                f" {_body_text(reply.body)!r}",
                None,
                attempt=head.attempts + 1,
                policy=policy,
                now_epoch=now_epoch,
                rand=rand,
            )
        ]
    outcomes: list[Outcome] = []
    for index, row in enumerate(rows):
        item = items[index] if index < len(items) else None
        if (
            isinstance(item, dict)
            and item.get("delivered") is True
            and item.get("outbox_id") == row.delivery_key
        ):
            text = json.dumps(item, sort_keys=True, separators=(",", ":"))
            outcomes.append(Delivered(answer=text[:MAX_ANSWER_CHARS]))
            continue
        shown = "no answer" if item is None else one_line(json.dumps(item), 200)
        outcomes.append(
            _deferred(
                f"the door's batch answer for row #{row.id} is not a delivery: {shown}",
                None,
                attempt=row.attempts + 1,
                policy=policy,
                now_epoch=now_epoch,
                rand=rand,
            )
        )
        break
    return outcomes


def _batch_items(body: bytes) -> list[object] | None:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("items"), list):
        return None
    items: list[object] = parsed["items"]
    return items
