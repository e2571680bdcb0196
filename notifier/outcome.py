"""What one delivery attempt came to: pure, no I/O, no clock of its own.

The door's contract: a 2xx with a JSON object body means delivered. Everything else — a
timeout, a refused connection, a 503 (`notification_channel_unavailable`, maybe with
`Retry-After`), any other status, a malformed answer — is a deferral: the row keeps its place
at the head of the queue and is tried again after

    delay = max(backoff(attempt), Retry-After)

where backoff doubles from `base_s` per attempt up to `max_s`, with "equal jitter": the delay
is drawn from [cap/2, cap], so a fleet of retries spreads out but never collapses to a hot
loop against a door that is down.

One deferral is not backed off: a refused connection (nothing listens on the door's port; the
client says so apart from timeouts and other errors). Trying again costs nothing, so the row is
tried again every `unreachable_retry_s` (UNREACHABLE_RETRY_S, 1 s, and never more than
`max_s`), however long the door has been down: a door that comes back gets the row within about
a second. A timeout, a 5xx, a Retry-After and every refusal by the door keep the backoff.

A batch (`classify_batch`) is answered item by item, in body order (chief.door.router): the rows
the door accepted are delivered; the first row it refused is deferred with the door's own
reason; the rows behind it were held by the door and stay as they were. A batch refused whole
for its size (413, or a 422 naming the door's row limit) is sent again smaller
(`smaller_batch`); `answers_row` is the one place an answer item is matched to its row.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# `last_error` is one line an operator reads in `coop status`; the door's answer is a record,
# not a dump.
MAX_ERROR_CHARS = 300
MAX_ANSWER_CHARS = 2000
# A Retry-After beyond a day is honoured as a day: the operator can `coop outbox retry` sooner.
MAX_RETRY_AFTER_S = 86_400.0
# A refused connection is tried again this soon, not on the growing backoff: nothing listens,
# and asking again costs a SYN on loopback.
UNREACHABLE_RETRY_S = 1.0


@dataclass(frozen=True)
class DoorReply:
    """What came back from one POST: a status and body, or `error` when no answer came."""

    status: int | None = None
    body: bytes = b""
    retry_after: str | None = None
    error: str | None = None
    #: No answer because nothing listens on the door's port (the connection was refused).
    refused_connection: bool = False
    #: The status in words (`Bad Gateway`), read at the seam (`plumbing.statuses`).
    phrase: str = ""


@dataclass(frozen=True)
class Delivered:
    answer: str


@dataclass(frozen=True)
class Deferred:
    error: str
    retry_in_s: float
    answer: str | None = None
    #: Deferred because nothing listened (a refused connection), on the short fixed interval.
    unreachable: bool = False
    #: Deferred because the door refused this row of a batch (its own verdict).
    refused: bool = False


Outcome = Delivered | Deferred


@dataclass(frozen=True)
class BackoffPolicy:
    base_s: float
    max_s: float
    unreachable_retry_s: float = UNREACHABLE_RETRY_S


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
    if reply.status is None and reply.refused_connection:
        error = reply.error or "the door refused the connection (nothing listens)"
        # Never longer than the backoff's cap: a refusal is no reason to wait more than any
        # other failure would.
        retry_in_s = min(policy.unreachable_retry_s, policy.max_s)
        return Deferred(error=one_line(error), retry_in_s=retry_in_s, unreachable=True)
    if reply.status is None:
        error = reply.error or "no answer from the door"
        return _deferred(
            error, None, attempt=attempt, policy=policy, now_epoch=now_epoch, rand=rand
        )
    body = _body_text(reply.body)
    status = f"{reply.status} {reply.phrase}" if reply.phrase else str(reply.status)
    error = f"HTTP {status}" + (f": {_detail(body)}" if body else "")
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
        return _reason(parsed["detail"])
    return body


def _reason(detail: object) -> str:
    """The door's `detail` as one line: a validation error list reads "field: message; ..."."""
    if isinstance(detail, list) and detail and all(isinstance(e, dict) for e in detail):
        return one_line(
            "; ".join(
                f"{'.'.join(str(part) for part in error.get('loc') or ()) or 'body'}:"
                f" {error.get('msg', error.get('type', '?'))}"
                for error in detail
            ),
            200,
        )
    return one_line(str(detail), 200)


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
    `{"items": [...]}`) defers the head row alone, as a single POST's failure would. (The
    caller has handled a 404, the door lacking the route, and a refusal for the batch's size.)
    A 2xx answer is read item by item, the item at a row's position being its answer: each row
    the door delivered is marked, in order, up to the first that it did not; that row is
    deferred, with the door's reason when the door refused it, and the rest are left as they
    were (the door held them, unrecorded)."""
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
        if isinstance(item, dict) and item.get("delivered") is True and answers_row(item, row):
            text = json.dumps(item, sort_keys=True, separators=(",", ":"))
            outcomes.append(Delivered(answer=text[:MAX_ANSWER_CHARS]))
            continue
        error, answer, refused = _not_delivered(item, row)
        deferred = _deferred(
            error,
            None,
            attempt=row.attempts + 1,
            policy=policy,
            now_epoch=now_epoch,
            rand=rand,
            answer=answer,
        )
        outcomes.append(dataclasses.replace(deferred, refused=refused))
        break
    return outcomes


def answers_row(item: dict[str, object], row: BatchRow) -> bool:
    """Whether `item`, the door's answer at `row`'s position in the batch, is about `row`: it
    echoes the key the client sent for the row as `outbox_id` (notifier.client `payload`). A
    refusal may echo nothing (the door echoes only an id it could have accepted)."""
    echoed = item.get("outbox_id")
    return echoed == row.delivery_key or (echoed is None and item.get("delivered") is not True)


def _not_delivered(item: object, row: BatchRow) -> tuple[str, str | None, bool]:
    """The `last_error`, the answer kept, and whether the door refused the row itself, for the
    first row a batch did not deliver."""
    if item is None:
        return "the door's batch answer has no item for this row", None, False
    shown = one_line(json.dumps(item), MAX_ANSWER_CHARS)
    if not isinstance(item, dict) or not answers_row(item, row):
        return (
            f"the door's batch answer for this row is about another: {shown[:200]}",
            shown,
            False,
        )
    refused = item.get("refused")
    if isinstance(refused, int) and not isinstance(refused, bool):
        return f"refused by the door ({refused}): {_reason(item.get('detail'))}", shown, True
    return f"not delivered by the door: {shown[:200]}", shown, False


def door_batch_limit(reply: DoorReply) -> int | None:
    """The door's row limit when `reply` is its 422 for a batch past CHIEF_NOTIFY_BATCH_MAX,
    else None. Its words are the door's (chief.door.router `_within_batch_limit`, its twin,
    pinned in tests/contract): "a batch carries at most 8 rows (CHIEF_NOTIFY_BATCH_MAX)"."""
    if reply.status != 422 or not reply.body:
        return None
    found = _DOOR_BATCH_LIMIT.search(reply.body.decode("utf-8", "replace"))
    if found is None or int(found.group(1)) < 1:
        return None
    return int(found.group(1))


_DOOR_BATCH_LIMIT = re.compile(r"at most (\d+) rows \(CHIEF_NOTIFY_BATCH_MAX\)")


def smaller_batch(reply: DoorReply, rows: int) -> int | None:
    """How many rows to send again when the door refused a batch of `rows` whole for its size,
    else None (the reply is classified as usual): its row limit when it named one below
    `rows`, else half (a 413: the body is past the door's limit), never below one row."""
    if rows < 2:
        return None
    limit = door_batch_limit(reply)
    if limit is not None and limit < rows:
        return limit
    if reply.status == 413:
        return max(1, rows // 2)
    return None


def _batch_items(body: bytes) -> list[object] | None:
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("items"), list):
        return None
    items: list[object] = parsed["items"]
    return items
