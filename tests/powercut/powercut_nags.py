"""The nags of the power-cut run (issue 28): requests with deadlines, reminders and urgent
reports among the producers (`tests.powercut.nag_producer`), tapped by the owner
(`tests.powercut.powercut_owner`); what the run reads of them once the house stopped, the
figures it prints and the promises it checks (`NagFigures.check`).

The clocks compared are one machine's: the emulator's receipt time of each message (it stamps a
message when it keeps it, before it answers), the ledger's commit times in coop.db (an event's
`at`, taken inside its transaction) and the door's in chief.db.

Each deadline applied once: every request filed with a deadline is decided by exactly one close
or abandon event, by the deadline (`via: deadline`, with the default or abandoned without one,
never before its `deadline_at`) unless the owner's tap committed first (`via: telegram`).

No reminder after a settle, nor after the deadline. The door knows an ask's deadline from the
start, and learns of its settle when it lands (the settle row accepted, `asks.settled_at`, or its
buttons void, `asks.voided_at`). After either, at most the one reminder already in flight may
still ring (chief.phone.reminders: a settle drops a queued reminder in its own transaction, and
none falls due at or after the deadline). In flight is measured, not assumed: the door's sender
sends one message at a time, each after the answer to the one before, so a reminder was not in
flight at a moment when Telegram received another message between that moment and it; and it
lands within a send's bound (`TELEGRAM_TIMEOUT_S`). The reminders rung after the ledger's commit
of the settle (coop.db) are counted and printed, not failed: the settle row is on its way to the
door then (or the house is down across a cut), and the door cannot know.

No urgent report left ringing after its acknowledgement: no `URGENT, again` for a report later
than one interval (`CHIEF_URGENT_RERING_S`) after chief.db recorded its acknowledgement or its
expiry; each report acknowledged or expired (an expiry may be acknowledged late, an
acknowledgement never expires), with exactly one Chief line for each, or still within its bounds;
no report rings more than its bounds allow.

The ladder (issue 35): a second person is paired, and a report nobody acknowledged within
ESCALATE_S climbs to rung 2, one ring in their chat. Each report's rung-2 rings: at most one
fresh (more only behind the in-doubt marker), each of a report chief.db moved to rung 2, none
later than one interval after its stop; and at least one report climbed (a run that rang no
rung 2 proved nothing of it).
"""

from __future__ import annotations

import bisect
import json
import random
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from chief.phone.pacing import REPEAT_MARKER
from tests.e2e.proof.proof_checks import carried_texts
from tests.powercut.nag_producer import KINDS

NAG_SHARE = 0.02  # of the rows, nags (at least NAG_MIN): each rings alone, paced at ~1 a second
NAG_MIN = 6
# The nags are filed within this long of the start (the rows take about 10 s, the cuts stretch
# it): each lives for seconds after, and the run waits for the last one to end.
FILE_WITHIN_S = 6.0
REMIND_MAX = 2  # COOP_REMIND_MAX: reminders every second (`--remind 1s`), at most two
RERING_S = 2.0  # CHIEF_URGENT_RERING_S, allowed this short by CHIEF_TEST_URGENT_SHORT (test only)
EXPIRE_S = 8.0  # CHIEF_URGENT_EXPIRE_S: at most five rings each
# CHIEF_ESCALATE_AFTER_S, at its test-only floor: nearly every report the owner has not
# acknowledged within half a second climbs (the owner acks within EXPIRE_S / 2, most later).
ESCALATE_S = 0.5
SECOND_ID = 5151  # the second person's private chat (its pairing written before the door starts)
IN_FLIGHT_S = 5.0  # a send's bound: the stack's TELEGRAM_TIMEOUT_S (tests.support.stack)
DOOR_ENV = {
    "CHIEF_TEST_URGENT_SHORT": "1",
    "CHIEF_URGENT_RERING_S": f"{RERING_S:g}",
    "CHIEF_URGENT_EXPIRE_S": f"{EXPIRE_S:g}",
    "CHIEF_ESCALATE_AFTER_S": f"{ESCALATE_S:g}",
}
ENGINE_ENV = {"COOP_REMIND_MAX": str(REMIND_MAX)}

# The words the parts match on (the contract).
REMINDER = "Reminder"
AGAIN = re.compile(r"URGENT, again \(ring (\d+), waiting \d+ min\): ")
RUNG_TWO = re.compile(r"URGENT, nobody acknowledged it for \d+ min: ")
URGENT_MARK = "URGENT: "
DOOR_LINES = ("acknowledged at ", "went unacknowledged ")
ACK_SUFFIX, EXPIRED_SUFFIX = "#urgent-ack", "#urgent-expired"
REQUEST_ID = re.compile(r"request #(\d+)")


def nag_count(rows: int) -> int:
    return max(NAG_MIN, round(rows * NAG_SHARE))


# Each run files at least these (when its count allows), the rest seeded: a cut can take the
# house down through one nag's whole life, so the kinds whose rings the run must see (a reminder,
# an urgent repeat) are filed twice; a deadline applies across any cut.
PLANNED = ("deadline", "remind", "remind", "urgent", "shout", "shout")


def plan_kinds(rng: random.Random, count: int) -> list[str]:
    """The run's nags in filing order: `PLANNED` first (as far as `count` allows), the rest
    seeded, all shuffled."""
    kinds = list(PLANNED)[:count] + [rng.choice(KINDS) for _ in range(count - len(PLANNED))]
    rng.shuffle(kinds)
    return kinds


def unrung(messages: list[dict[str, Any]]) -> list[str]:
    """The kinds of nag whose ring the run must see and Telegram has not received yet: a
    `remind` (no `Reminder` yet), a `shout` (no `URGENT, again` yet). A cut can take the house
    down through every such nag's life; once the cuts are over, the run files one more of each
    kind still missing that no live nag can ring (`PowerCutRun.file_unrung_nags`); a deadline
    applies across any cut."""
    bodies = [str(m["text"]).removeprefix(REPEAT_MARKER) for m in messages]
    missing = []
    if not any(body.startswith(REMINDER) for body in bodies):
        missing.append("remind")
    if not any(AGAIN.match(body) for body in bodies):
        missing.append("shout")
    return missing


def live_kinds(stack: Reads, rows: dict[int, dict[str, Any]]) -> set[str]:
    """The kinds of `unrung` with a nag still alive, which may yet ring: a reminded request
    still open, a `coop notify --urgent` report still ringing."""
    live = set()
    reminded = [one.request_id for one in asked_requests(rows).values() if one.remind_max]
    if reminded:
        marks = ", ".join("?" * len(reminded))
        still = stack.read(
            stack.coop_db,
            f"SELECT COUNT(*) FROM requests WHERE id IN ({marks}) AND status IN ('open', 'taken')",
            *reminded,
        )
        if still[0][0]:
            live.add("remind")
    shouts = {
        str(r["delivery_key"]) for r in rows.values()
        if (r["extra"] or {}).get("urgent") is True and r["kind"] != "request_added"
    }  # fmt: skip
    ringing = [key for key, one in urgent_reports(stack).items()
               if one.acked_at is None and one.expired_at is None]  # fmt: skip
    if shouts & set(ringing):
        live.add("shout")
    return live


def row_texts(text: str, known: set[str] | dict[str, Any]) -> list[str]:
    """The ledger rows one Telegram message rings: none for a message the door made itself (a
    reminder, an urgent repeat, a rung 2 ring, a line); an ask's or an urgent report's own row
    read past what the door adds (the `URGENT: ` mark before, the deadline's line after); else
    as the proof reads a message (`carried_texts`: itself, a repeat, a digest)."""
    body = text.removeprefix(REPEAT_MARKER)
    if body.startswith((REMINDER, *DOOR_LINES)) or AGAIN.match(body) or RUNG_TWO.match(body):
        return []
    found = known_prefix(body.removeprefix(URGENT_MARK), known)
    return [found] if found is not None else carried_texts(text, known)


def known_prefix(text: str, known: set[str] | dict[str, Any]) -> str | None:
    """The longest run of `text`'s first lines that is a known row text, or None."""
    lines = text.split("\n")
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end])
        if candidate in known:
            return candidate
    return None


def epoch(stamp: str | float | None) -> float | None:
    """An ISO time (coop.db's `...Z`, chief.db's `+00:00`) or epoch seconds, as epoch seconds."""
    if stamp is None or isinstance(stamp, float | int):
        return stamp
    return datetime.fromisoformat(stamp).timestamp()


class Reads(Protocol):
    """What the nags' reads need of the stack (`PowerCutStack`)."""

    coop_db: Path
    chief_db: Path

    def read(self, db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]: ...
    def has_table(self, db: Path, name: str) -> bool: ...


@dataclass(frozen=True)
class Asked:
    """A request filed with a deadline, as its `request_added` row's `ask` extra says."""

    request_id: int
    deadline_at: float
    default: str | None
    remind_max: int | None
    urgent: bool


@dataclass(frozen=True)
class Decision:
    """One close or abandon event of a request."""

    event: str
    at: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class Report:
    """One urgent report as chief.db holds it (`urgent_reports`)."""

    key: str
    rings: int
    created_at: float
    acked_at: float | None
    acked_via: str | None
    expired_at: float | None
    rung: int = 1


def asked_requests(rows: dict[int, dict[str, Any]]) -> dict[int, Asked]:
    """Every request filed to the owner with a deadline, by id."""
    found = {}
    for row in rows.values():
        extra = row["extra"] or {}
        ask = extra.get("ask") or {}
        if "deadline_at" not in ask:
            continue
        remind = ask.get("remind") or {}
        found[int(ask["request_id"])] = Asked(
            int(ask["request_id"]), float(ask["deadline_at"]), ask.get("default"),
            remind.get("max"), extra.get("urgent") is True,
        )  # fmt: skip
    return found


def decisions(stack: Reads) -> dict[int, list[Decision]]:
    """Each request's close and abandon events, oldest first."""
    found: dict[int, list[Decision]] = defaultdict(list)
    rows = stack.read(
        stack.coop_db,
        "SELECT item_id, event, at, payload FROM coop_events WHERE item_kind = 'request'"
        " AND event IN ('close', 'abandon') ORDER BY id",
    )
    for item_id, event, at, payload in rows:
        found[int(item_id)].append(Decision(event, epoch(at) or 0.0, _json(payload)))
    return found


def _json(raw: str | None) -> dict[str, Any]:
    return dict(json.loads(raw)) if raw else {}


def door_settles(stack: Reads) -> tuple[dict[int, float], dict[int, int]]:
    """When the door learned each asked request was settled (its buttons void, or its settle
    row landed, whichever came first), by request id; and which request each of the ask's
    messages (the ask, its reminders) belongs to, by Telegram message id."""
    if not stack.has_table(stack.chief_db, "asks"):
        return {}, {}
    settled: dict[int, float] = {}
    for request_id, voided, landed in stack.read(
        stack.chief_db, "SELECT request_id, voided_at, settled_at FROM asks"
    ):
        times = [t for t in (epoch(voided), epoch(landed)) if t is not None]
        if times:
            settled[int(request_id)] = min(times)
    rung = stack.read(
        stack.chief_db,
        "SELECT m.message_id, a.request_id FROM ask_messages m JOIN asks a USING (ask_key)",
    )
    return settled, {int(message): int(request) for message, request in rung}


def urgent_reports(stack: Reads) -> dict[str, Report]:
    """chief.db's urgent reports by key (the delivery key of the row that filed each)."""
    if not stack.has_table(stack.chief_db, "urgent_reports"):
        return {}
    rows = stack.read(
        stack.chief_db,
        "SELECT urgent_key, rings, created_at, acked_at, acked_via, expired_at, rung "
        "FROM urgent_reports",
    )
    return {
        str(key): Report(
            str(key), int(rings), float(created), epoch(acked), via, epoch(expired), int(rung)
        )
        for key, rings, created, acked, via, expired, rung in rows
    }


def urgent_lines(stack: Reads) -> Counter[str]:
    """The Chief lines of acknowledgements and expiries, by `<urgent key><suffix>`."""
    rows = stack.read(
        stack.chief_db,
        "SELECT external_request_id FROM messages WHERE external_request_id LIKE ?",
        "chief-report:coop-notify:%#urgent-%",
    )
    return Counter(str(r[0]).removeprefix("chief-report:coop-notify:") for r in rows)


@dataclass(frozen=True)
class Ring:
    """One message the emulator kept: when, and whether it was a repeat after an in-doubt send
    (behind the door's marker)."""

    at: float
    repeat: bool


@dataclass
class Seen:
    """What Telegram received of the nags, read from the emulator's receipt log."""

    reminders: dict[int, list[Ring]] = field(default_factory=lambda: defaultdict(list))
    firsts: dict[str, list[Ring]] = field(default_factory=lambda: defaultdict(list))
    agains: dict[str, list[Ring]] = field(default_factory=lambda: defaultdict(list))
    rung_two: dict[str, list[Ring]] = field(default_factory=lambda: defaultdict(list))
    door_lines: int = 0
    stray: list[str] = field(default_factory=list)

    @property
    def repeats(self) -> int:
        """Reminders and urgent rings rung again behind the marker (an in-doubt send)."""
        every = [*self.reminders.values(), *self.firsts.values(), *self.agains.values(),
                 *self.rung_two.values()]  # fmt: skip
        return sum(ring.repeat for rings in every for ring in rings)


def read_messages(
    messages: list[dict[str, Any]], rows: dict[int, dict[str, Any]], asked_by: dict[int, int]
) -> Seen:
    """Sort each nag message: a reminder to its request (by the ask message it replies to, else
    the request it names), an urgent report's first ring and its repeats to its key (by the row
    text they carry). `asked_by`: ask message id -> request id (chief.db)."""
    by_text = {row["text"]: row for row in rows.values()}
    seen = Seen()
    for message in messages:
        text = str(message["text"])
        body = text.removeprefix(REPEAT_MARKER)
        ring = Ring(float(message["received_at"]), body != text)
        again, climbed = AGAIN.match(body), RUNG_TWO.match(body)
        if climbed is not None and message.get("chat_id") == SECOND_ID:
            found = known_prefix(body[climbed.end() :], by_text)
            if found is None:
                seen.stray.append(text)
                continue
            seen.rung_two[str(by_text[found]["delivery_key"])].append(ring)
        elif body.startswith(REMINDER):
            request_id = asked_by.get(int(message.get("reply_to_message_id") or 0))
            named = REQUEST_ID.search(body)
            if request_id is None and named is not None:
                request_id = int(named.group(1))
            if request_id is None:
                seen.stray.append(text)
                continue
            seen.reminders[request_id].append(ring)
        elif again is not None:
            found = known_prefix(body[again.end() :], by_text)
            if found is None:
                seen.stray.append(text)
                continue
            seen.agains[str(by_text[found]["delivery_key"])].append(ring)
        elif body.startswith(DOOR_LINES):
            seen.door_lines += 1
        elif body.startswith(URGENT_MARK):
            found = known_prefix(body.removeprefix(URGENT_MARK), by_text)
            if found is not None and (by_text[found]["extra"] or {}).get("urgent") is True:
                seen.firsts[str(by_text[found]["delivery_key"])].append(ring)
    return seen


@dataclass
class DeadlineFigures:
    """Each request filed with a deadline, and how it was decided."""

    requests: int = 0
    decided: Counter[str] = field(default_factory=Counter)  # deadline closed/abandoned, tap, other
    per_request: Counter[int] = field(default_factory=Counter)  # decisions: requests
    tap_after_deadline: int = 0  # taps that committed after the deadline passed, before it applied
    late_s: list[float] = field(default_factory=list)
    early: list[int] = field(default_factory=list)  # decided by the deadline before it came
    wrong: list[int] = field(default_factory=list)  # not the default (or not abandoned without)
    other: list[int] = field(default_factory=list)  # decided by neither the deadline nor a tap

    def add(self, asked: Asked, decided: list[Decision]) -> None:
        self.requests += 1
        self.per_request[len(decided)] += 1
        if not decided:
            return
        first = decided[0]
        via = first.payload.get("via")
        if via == "telegram":
            self.decided["tap"] += 1
            self.tap_after_deadline += first.at > asked.deadline_at
        elif via != "deadline":
            self.other.append(asked.request_id)
            return
        else:
            self.decided[f"deadline {first.event}"] += 1
            self.late_s.append(float(first.payload.get("late_s", -1)))
            if first.at + 0.001 < asked.deadline_at:  # `at` is stored to the millisecond
                self.early.append(asked.request_id)
            want = ("close", asked.default) if asked.default else ("abandon", None)
            if (first.event, first.payload.get("choice")) != want:
                self.wrong.append(asked.request_id)

    def line(self) -> str:
        late = sorted(self.late_s)
        late_words = (
            f"late_s p50 {statistics.median(late):.3f} max {late[-1]:.3f}" if late else "late_s -"
        )
        return (
            f"deadlines {self.requests}: decided {dict(sorted(self.decided.items()))} (taps that"
            f" won after the deadline passed {self.tap_after_deadline}); decisions per request"
            f" {dict(sorted(self.per_request.items()))}; {late_words}; early {self.early},"
            f" wrong outcome {self.wrong}, decided otherwise {self.other}"
        )

    def check(self, where: str) -> None:
        assert self.requests >= 1, f"the run filed no request with a deadline {where}"
        assert set(self.per_request) == {1}, (
            f"deadlines not decided exactly once (decisions: requests) {self.per_request} {where}"
        )
        assert not self.early, f"deadlines applied before they came {self.early} {where}"
        assert not self.wrong, f"deadlines decided against their default {self.wrong} {where}"
        assert not self.other, f"requests decided by neither deadline nor tap {self.other} {where}"
        assert all(s >= 0 for s in self.late_s), f"a deadline's late_s {self.late_s} {where}"


def rung_late(rings: list[Ring], at: float, receipts: list[float]) -> tuple[list[float], str]:
    """The reminders rung after `at` (seconds after it), and what is wrong with them ("" when
    nothing is): after `at` at most the one message already in flight may still ring, within a
    send's bound. The door's sender sends one message at a time, each after the answer to the
    one before, so a message was not yet sent at `at` when Telegram received another between
    `at` and it (`receipts`: every receipt time, sorted)."""
    late = sorted(ring.at for ring in rings if ring.at > at)
    gaps = [t - at for t in late]
    if not late:
        return gaps, ""
    if len(late) > 1:
        return gaps, f"{len(late)} reminders"
    between = bisect.bisect_left(receipts, late[0]) - bisect.bisect_right(receipts, at)
    if between > 0:
        return gaps, f"a reminder queued, not in flight ({between} messages rang before it)"
    if gaps[0] > IN_FLIGHT_S:
        return gaps, f"a reminder {gaps[0]:.2f} s later, past a send's bound"
    return gaps, ""


@dataclass
class ReminderFigures:
    """The reminders each request rang, against its deadline and its settle (the door's, the
    ledger's). `receipts`: every message's receipt time, sorted (`rung_late`)."""

    receipts: list[float] = field(default_factory=list)
    reminders: int = 0
    requests: int = 0  # requests that rang at least one
    per_request: Counter[int] = field(default_factory=Counter)  # reminders: requests
    after_door: list[float] = field(default_factory=list)  # seconds after the door's settle
    after_deadline: list[float] = field(default_factory=list)
    after_ledger: list[float] = field(default_factory=list)  # after the ledger's commit
    late: list[str] = field(default_factory=list)  # broken: rung after the settle or deadline
    over_max: list[int] = field(default_factory=list)
    unsettled: list[int] = field(default_factory=list)  # rang, and the door never heard a settle
    stray: list[str] = field(default_factory=list)

    def add(
        self, asked: Asked, rings: list[Ring], door_at: float | None, ledger_at: float | None
    ) -> None:
        fresh = [ring for ring in rings if not ring.repeat]
        self.reminders += len(rings)
        self.requests += bool(rings)
        self.per_request[len(fresh)] += 1
        if len(fresh) > (asked.remind_max or 0):
            self.over_max.append(asked.request_id)
        if not rings:
            return
        if door_at is None:
            self.unsettled.append(asked.request_id)
            return
        for what, at, gaps in (
            ("the door's settle", door_at, self.after_door),
            ("the deadline", asked.deadline_at, self.after_deadline),
        ):
            after, wrong = rung_late(rings, at, self.receipts)
            gaps += after
            if wrong:
                self.late.append(f"request #{asked.request_id}: {wrong} after {what}")
        if ledger_at is not None:
            self.after_ledger += rung_late(rings, ledger_at, self.receipts)[0]

    def line(self) -> str:
        def most(gaps: list[float]) -> str:
            return f"{len(gaps)} (latest {max(gaps):.2f} s after)" if gaps else "0"

        return (
            f"reminders {self.reminders} from {self.requests} requests (fresh reminders:"
            f" requests {dict(sorted(self.per_request.items()))}, at most {REMIND_MAX} each);"
            f" after the door's settle {most(self.after_door)}; after the deadline"
            f" {most(self.after_deadline)}; after the ledger's settle {most(self.after_ledger)}"
        )

    def check(self, where: str) -> None:
        assert not self.stray, f"reminders of no request {self.stray[:3]} {where}"
        assert not self.over_max, f"requests reminded past their max {self.over_max} {where}"
        assert not self.unsettled, f"reminded requests the door never settled {where}"
        assert not self.late, f"reminders rang after their stop: {self.late} {where}"


@dataclass
class UrgentFigures:
    """Each urgent report: how it stopped, how often it rang, and when against its stop."""

    reports: int = 0
    stopped: Counter[str] = field(default_factory=Counter)  # acked via ..., expired, ringing
    rings: Counter[int] = field(default_factory=Counter)  # fresh rings: reports
    repeats: int = 0  # fresh `URGENT, again` rings of every report
    after_stop: list[float] = field(default_factory=list)  # repeats after ack/expiry, seconds
    late: list[str] = field(default_factory=list)  # a repeat past one interval after the stop
    expired_after_ack: list[str] = field(default_factory=list)
    over_bound: list[str] = field(default_factory=list)
    lines_wrong: list[str] = field(default_factory=list)
    unreported: list[str] = field(default_factory=list)  # rang urgent, no report in chief.db
    stray: list[str] = field(default_factory=list)
    climbed: int = 0  # reports chief.db moved to rung 2
    rung_two_rings: int = 0  # their fresh rings in the second person's chat
    ladder_wrong: list[str] = field(default_factory=list)  # doubled, unrecorded or late

    def add_ladder(self, report: Report, rung_two: list[Ring]) -> None:
        """Rung 2 of `report`: rung at most once fresh, only for a rung chief.db recorded, and
        not later than one interval after the report stopped."""
        self.climbed += report.rung >= 2
        fresh = sum(not ring.repeat for ring in rung_two)
        self.rung_two_rings += fresh
        if fresh > 1:
            self.ladder_wrong.append(f"{report.key}: rung 2 rang {fresh} times")
        if rung_two and report.rung < 2:
            self.ladder_wrong.append(f"{report.key}: rung 2 rang, chief.db has rung {report.rung}")
        stops = [at for at in (report.acked_at, report.expired_at) if at is not None]
        if stops and any(ring.at - min(stops) > RERING_S for ring in rung_two):
            self.ladder_wrong.append(f"{report.key}: rung 2 rang after its stop")

    def add(self, report: Report, firsts: list[Ring], agains: list[Ring], lines: Counter[str],
            now: float) -> None:  # fmt: skip
        self.reports += 1
        acked, expired = report.acked_at, report.expired_at
        stops = [at for at in (acked, expired) if at is not None]
        stop = min(stops) if stops else None
        if acked is not None and expired is not None:
            # An expiry is acknowledged late (chief.store.urgent); an acknowledgement never expires.
            self.stopped[f"expired, then acknowledged ({report.acked_via})"] += 1
            if acked < expired:
                self.expired_after_ack.append(report.key)
        elif acked is not None:
            self.stopped[f"acknowledged ({report.acked_via})"] += 1
        elif expired is not None:
            self.stopped["expired"] += 1
        else:
            self.stopped["ringing"] += 1
            if now > report.created_at + EXPIRE_S + RERING_S:
                self.over_bound.append(f"{report.key}: ringing past its expiry")
        fresh = sum(not ring.repeat for ring in [*firsts, *agains])
        self.rings[fresh] += 1
        self.repeats += sum(not ring.repeat for ring in agains)
        if fresh > int(EXPIRE_S // RERING_S) + 1:
            self.over_bound.append(f"{report.key}: {fresh} rings")
        if stop is not None:
            gaps = [ring.at - stop for ring in agains if ring.at > stop]
            self.after_stop += gaps
            if any(gap > RERING_S for gap in gaps):
                self.late.append(f"{report.key}: {[round(g, 2) for g in gaps]} s after")
        want = Counter({ACK_SUFFIX: report.acked_at is not None,
                        EXPIRED_SUFFIX: report.expired_at is not None})  # fmt: skip
        got = Counter({suffix: lines[report.key + suffix] for suffix in want})
        if +got != +want:
            self.lines_wrong.append(f"{report.key}: {dict(got)}")

    def line(self) -> str:
        after = f" (latest {max(self.after_stop):.2f} s after)" if self.after_stop else ""
        return (
            f"urgent reports {self.reports}: {dict(sorted(self.stopped.items()))}; fresh rings:"
            f" reports {dict(sorted(self.rings.items()))} (bound {int(EXPIRE_S // RERING_S) + 1});"
            f" repeats {self.repeats}, after the acknowledgement or expiry"
            f" {len(self.after_stop)}{after}, bound {RERING_S:g} s; ladder: {self.climbed}"
            f" climbed to rung 2, {self.rung_two_rings} fresh rung 2 rings"
        )

    def check(self, where: str) -> None:
        assert self.reports >= 1, f"the run rang no urgent report {where}"
        assert not self.stray, f"urgent repeats of no report {self.stray[:3]} {where}"
        assert not self.unreported, f"urgent rows rung without a report {self.unreported} {where}"
        assert not self.expired_after_ack, (
            f"reports expired after their acknowledgement {self.expired_after_ack} {where}"
        )
        assert not self.late, f"urgent reports rang on after their stop {self.late} {where}"
        assert not self.over_bound, f"urgent reports past their bounds {self.over_bound} {where}"
        assert not self.lines_wrong, (
            f"acknowledgement/expiry Chief lines not one per stop {self.lines_wrong} {where}"
        )
        assert not self.ladder_wrong, f"rung 2 not once per report {self.ladder_wrong} {where}"


@dataclass
class NagFigures:
    """The nags' figures and promises, after the run (`measure`)."""

    filed: Counter[str]
    deadlines: DeadlineFigures
    reminders: ReminderFigures
    urgent: UrgentFigures
    taps: Counter[str]
    repeats: int  # reminders and urgent rings rung again behind the marker (in doubt)
    door_lines: int  # acknowledgement or expiry lines that rang Telegram

    def lines(self) -> list[str]:
        return [
            f"nags filed {dict(sorted(self.filed.items()))}; the owner's taps"
            f" {dict(sorted(self.taps.items()))}; nag repeats in doubt {self.repeats}",
            self.deadlines.line(),
            self.reminders.line(),
            self.urgent.line(),
        ]

    def check(self, where: str) -> None:
        self.deadlines.check(where)
        self.reminders.check(where)
        self.urgent.check(where)
        missing = self.unexercised()
        assert not missing, (
            f"the run never exercised {', '.join(missing)}, so its promises about them were not"
            f" tested {where}"
        )

    def unexercised(self) -> list[str]:
        """The kinds of nag the checks above speak of that never happened in the run: at least
        one deadline applied, one reminder and one urgent repeat rung, or the checks of that
        kind held over nothing."""
        applied = sum(n for how, n in self.deadlines.decided.items() if how.startswith("deadline"))
        fresh_reminders = sum(n * count for n, count in self.reminders.per_request.items())
        happened = {
            "a deadline applied": applied,
            "a reminder rung": fresh_reminders,
            "an urgent repeat rung": self.urgent.repeats,
            "an urgent report climbing to rung 2": self.urgent.climbed,
        }
        return [kind for kind, count in happened.items() if not count]


def filed_kinds(rows: dict[int, dict[str, Any]], asked: dict[int, Asked]) -> Counter[str]:
    found: Counter[str] = Counter()
    for one in asked.values():
        found["urgent" if one.urgent else "remind" if one.remind_max else "deadline"] += 1
    found["shout"] = sum(
        1
        for r in rows.values()
        if (r["extra"] or {}).get("urgent") is True and r["kind"] != "request_added"
    )
    return found


def measure(
    stack: Reads, rows: dict[int, dict[str, Any]], messages: list[dict[str, Any]],
    taps: Counter[str], now: float,
) -> NagFigures:  # fmt: skip
    """Read the nags' outcome once the house stopped."""
    asked = asked_requests(rows)
    decided = decisions(stack)
    door_at, asked_by = door_settles(stack)
    seen = read_messages(messages, rows, asked_by)
    deadlines, urgent = DeadlineFigures(), UrgentFigures()
    reminders = ReminderFigures(sorted(float(m["received_at"]) for m in messages))
    for request_id, one in sorted(asked.items()):
        mine = decided.get(request_id, [])
        deadlines.add(one, mine)
        ledger_at = mine[0].at if mine else None
        reminders.add(one, seen.reminders.get(request_id, []), door_at.get(request_id), ledger_at)
    reminders.stray = seen.stray + [f"request #{n}" for n in set(seen.reminders) - set(asked)]
    reports, lines = urgent_reports(stack), urgent_lines(stack)
    for key, report in sorted(reports.items()):
        urgent.add(report, seen.firsts.get(key, []), seen.agains.get(key, []), lines, now)
        urgent.add_ladder(report, seen.rung_two.get(key, []))
    urgent.unreported = sorted(set(seen.firsts) - set(reports))
    urgent.stray = sorted((set(seen.agains) | set(seen.rung_two)) - set(reports))
    return NagFigures(
        filed_kinds(rows, asked), deadlines, reminders, urgent, taps, seen.repeats,
        seen.door_lines,
    )  # fmt: skip


def nags_done(stack: Reads, rows: dict[int, dict[str, Any]]) -> bool:
    """Every request with a deadline decided, every urgent report stopped, and nothing left on
    the door's Telegram queue: nothing more will ring."""
    asked = asked_requests(rows)
    if asked:
        marks = ", ".join("?" * len(asked))
        still = stack.read(
            stack.coop_db,
            f"SELECT COUNT(*) FROM requests WHERE id IN ({marks}) AND status IN ('open', 'taken')",
            *asked,
        )
        if still[0][0]:
            return False
    if stack.has_table(stack.chief_db, "urgent_reports"):
        ringing = stack.read(
            stack.chief_db,
            "SELECT COUNT(*) FROM urgent_reports WHERE acked_at IS NULL AND expired_at IS NULL",
        )
        if ringing[0][0]:
            return False
    queued = stack.read(stack.chief_db, "SELECT COUNT(*) FROM telegram_queue")
    return not queued or not queued[0][0]
