"""The power-cut run's reading of the nags (tests.powercut.powercut_nags), on made-up receipts:
each message the door makes of a row reads back to that row, the door's own nags are sorted to
their request or report, and each promise fails on the timeline that breaks it. No processes, no
FUSE: the run itself is tests/powercut/test_powercut_run.py."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chief.phone.pacing import REPEAT_MARKER
from tests.powercut import powercut_nags as nags
from tests.powercut.powercut_nags import (
    Asked,
    DeadlineFigures,
    Decision,
    ReminderFigures,
    Report,
    Ring,
    UrgentFigures,
)
from tests.powercut.powercut_owner import GOT_IT, Owner

ASK = "request #5 from prover: nag nag.1-0: may I (approve / decline)"
SHOUT = "nag nag.1-1: the freezer is warm"


def row(row_id: int, text: str, key: str, extra: dict[str, object] | None) -> dict[str, object]:
    return {"text": text, "delivery_key": key, "extra": extra, "kind": "note", "state": "delivered"}


ROWS = {
    1: row(1, ASK, "d-ask", {"ask": {"request_id": 5, "key": "q-1", "deadline_at": 100.0}}),
    2: row(2, SHOUT, "d-shout", {"urgent": True}),
    3: row(3, "proof p0.1-0: a note for the owner", "d-plain", None),
}
KNOWN = {str(r["text"]): i for i, r in ROWS.items()}


@pytest.mark.parametrize(
    "text",
    [
        'Reminder 1 of 2: request #5 "nag nag.1-0: may I" has waited 2 s',
        f"URGENT, again (ring 3, waiting 1 min): {SHOUT}",
        f"{REPEAT_MARKER}URGENT, again (ring 2, waiting 0 min): {SHOUT}",
        f"acknowledged at 14:05 by the owner (after 3 rings): {SHOUT}",
        f"acknowledged at 14:05 by the second person (after 3 rings): {SHOUT}",
        f"went unacknowledged after 4 rings in 0 min: {SHOUT}",
    ],
)
def test_the_doors_own_nags_ring_no_row(text: str) -> None:
    assert nags.row_texts(text, KNOWN) == []


@given(
    text=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1).filter(
        lambda t: (
            not t.startswith(("Reminder", "URGENT", "acknowledged", "went", "(possible"))
            and not t[0].isdigit()
        )
    ),
    urgent=st.booleans(),
    deadline=st.booleans(),
    repeat=st.booleans(),
)
def test_a_row_rung_as_the_door_dresses_it_reads_back_to_the_row(
    text: str, urgent: bool, deadline: bool, repeat: bool
) -> None:
    """The urgent mark before, the deadline's line after, the in-doubt marker before all."""
    sent = (nags.URGENT_MARK if urgent else "") + text
    sent += "\ndecline at 18:00 if no answer" if deadline else ""
    sent = (REPEAT_MARKER if repeat else "") + sent
    assert nags.row_texts(sent, {text: 1}) == [text]


def test_reminders_go_to_their_request_and_repeats_to_their_report() -> None:
    messages = [
        {"text": "Reminder 1 of 2: request #5 ...", "received_at": 1.0, "reply_to_message_id": 7},
        {"text": "Reminder 2 of 2: request #5 ...", "received_at": 2.0},
        {"text": f"URGENT: {SHOUT}", "received_at": 3.0},
        {
            "text": f"{REPEAT_MARKER}URGENT, again (ring 2, waiting 0 min): {SHOUT}",
            "received_at": 4,
        },
        {"text": "URGENT, again (ring 2, waiting 0 min): nag gone-1: x", "received_at": 5.0},
    ]
    seen = nags.read_messages(messages, ROWS, {7: 5})
    assert [r.at for r in seen.reminders[5]] == [1.0, 2.0]
    assert seen.firsts["d-shout"] == [Ring(3.0, False)]
    assert seen.agains["d-shout"] == [Ring(4.0, True)]
    assert seen.repeats == 1
    assert len(seen.stray) == 1


ASKED = Asked(5, deadline_at=100.0, default="decline", remind_max=2, urgent=False)


def test_one_reminder_in_flight_at_the_settle_or_the_deadline_is_allowed_and_no_more() -> None:
    receipts = [97.0, 98.0, 98.5, 99.1, 100.5]  # every message Telegram received
    ok = ReminderFigures(receipts)
    ok.add(ASKED, [Ring(98.0, False), Ring(99.1, False)], door_at=99.0, ledger_at=98.9)
    ok.check("")
    assert ok.after_door == [pytest.approx(0.1)]
    assert ok.after_ledger == [pytest.approx(0.2)]
    cases = {
        "2 reminders after the door's settle": ([99.1, 99.2], 99.0),
        "not in flight .* after the door's settle": ([99.3], 99.0),
        "past a send's bound after the door's settle": ([100.6 + nags.IN_FLIGHT_S + 1], 100.6),
        "not in flight .* after the deadline": ([100.7], 101.0),
    }
    for words, (times, door_at) in cases.items():
        broken = ReminderFigures(sorted([*receipts, *times]))
        broken.add(ASKED, [Ring(t, False) for t in times], door_at=door_at, ledger_at=None)
        with pytest.raises(AssertionError, match=words):
            broken.check("")
    many = ReminderFigures(receipts)
    many.add(ASKED, [Ring(t, False) for t in (97.0, 98.0, 98.5)], door_at=99.0, ledger_at=99.0)
    with pytest.raises(AssertionError, match="past their max"):
        many.check("")


def report(acked: float | None = None, expired: float | None = None) -> Report:
    return Report("d-shout", 2, 10.0, acked, "got_it" if acked else None, expired)


def test_an_urgent_repeat_past_one_interval_after_its_acknowledgement_fails() -> None:
    lines = Counter({"d-shout#urgent-ack": 1})
    within = UrgentFigures()
    within.add(report(acked=12.0), [Ring(10.5, False)], [Ring(13.0, False)], lines, now=20.0)
    within.check("")
    late = UrgentFigures()
    late.add(report(acked=12.0), [Ring(10.5, False)], [Ring(12.0 + nags.RERING_S + 0.1, False)],
             lines, now=20.0)  # fmt: skip
    with pytest.raises(AssertionError, match="rang on after their stop"):
        late.check("")
    late_ack = UrgentFigures()
    both = lines + Counter({"d-shout#urgent-expired": 1})
    late_ack.add(report(acked=19.0, expired=18.0), [Ring(10.5, False)], [], both, now=20.0)
    late_ack.check("")  # an expiry acknowledged late (chief.store.urgent)
    expired_after = UrgentFigures()
    expired_after.add(report(acked=12.0, expired=18.0), [Ring(10.5, False)], [], both, now=20.0)
    with pytest.raises(AssertionError, match="expired after their acknowledgement"):
        expired_after.check("")
    twice = UrgentFigures()
    twice.add(report(acked=12.0), [Ring(10.5, False)], [], lines + lines, now=20.0)
    with pytest.raises(AssertionError, match="Chief lines"):
        twice.check("")


def test_rung_two_twice_unrecorded_or_after_the_stop_fails() -> None:
    climbed = Report("d-shout", 2, 10.0, 12.0, "got_it", None, rung=2)
    once = UrgentFigures(reports=1)
    once.add_ladder(climbed, [Ring(10.6, False), Ring(11.5, True)])  # one marked in-doubt repeat
    once.check("")
    assert (once.climbed, once.rung_two_rings) == (1, 1)
    for rings, rung, words in [
        ([Ring(10.6, False), Ring(11.0, False)], 2, "rang 2 times"),
        ([Ring(10.6, False)], 1, "chief.db has rung 1"),
        ([Ring(12.0 + nags.RERING_S + 0.1, False)], 2, "after its stop"),
    ]:
        wrong = UrgentFigures(reports=1)
        wrong.add_ladder(Report("d-shout", 2, 10.0, 12.0, "got_it", None, rung=rung), rings)
        with pytest.raises(AssertionError, match=words):
            wrong.check("")


def test_a_rung_two_ring_is_no_ledger_row() -> None:
    assert nags.row_texts(f"URGENT, nobody acknowledged it for 0 min: {SHOUT}", KNOWN) == []


def test_a_deadline_decided_twice_early_or_against_its_default_fails() -> None:
    by_deadline = {"via": "deadline", "late_s": 0.1, "choice": "decline"}
    fine = DeadlineFigures()
    fine.add(ASKED, [Decision("close", 100.1, by_deadline)])
    fine.add(ASKED, [Decision("close", 101.0, {"via": "telegram"})])
    fine.check("")
    assert fine.tap_after_deadline == 1
    cases = {
        "exactly once": [Decision("close", 100.1, by_deadline)] * 2,
        "before they came": [Decision("close", 99.0, by_deadline)],
        "against their default": [Decision("abandon", 100.1, {"via": "deadline", "late_s": 0})],
        "neither deadline nor tap": [Decision("close", 100.1, {})],
    }
    for words, decided in cases.items():
        broken = DeadlineFigures()
        broken.add(ASKED, decided)
        with pytest.raises(AssertionError, match=words):
            broken.check("")


def figures(
    decided: Counter[str], reminders: int, repeats: int, climbed: int = 1
) -> nags.NagFigures:
    deadlines = DeadlineFigures(requests=sum(decided.values()), decided=decided,
                                per_request=Counter({1: sum(decided.values())}))  # fmt: skip
    reminded = ReminderFigures(reminders=reminders, per_request=Counter({reminders: 1}))
    urgent = UrgentFigures(reports=1, repeats=repeats, climbed=climbed)
    return nags.NagFigures(Counter(), deadlines, reminded, urgent, Counter(), 0, 0)


def test_a_run_that_never_rang_a_kind_it_checks_fails_naming_it() -> None:
    """`reminders 0 from 0 requests` passed every reminder promise, held over nothing."""
    figures(Counter({"deadline close": 1, "tap": 1}), reminders=1, repeats=1).check("")
    cases = {
        "a deadline applied": figures(Counter({"tap": 2}), reminders=1, repeats=1),
        "a reminder rung": figures(Counter({"deadline abandon": 1}), reminders=0, repeats=1),
        "an urgent repeat rung": figures(Counter({"deadline close": 1}), reminders=2, repeats=0),
        "an urgent report climbing to rung 2": figures(
            Counter({"deadline close": 1}), reminders=1, repeats=1, climbed=0
        ),
    }
    for words, broken in cases.items():
        with pytest.raises(AssertionError, match=f"never exercised {words}"):
            broken.check("")


def first_ring(name: str, kind: str, message_id: int) -> dict[str, object]:
    """A nag's first message as the chat shows it: an ask's choices, or a shout's Got it."""
    labels = [GOT_IT] if kind == "shout" else ["approve", "decline"]
    text = f"{name} [{kind}]: " + ("the freezer is warm" if kind == "shout" else "may I")
    keyboard = [[{"text": label} for label in labels]]
    text = ("URGENT: " if kind == "shout" else "") + text
    return {"message_id": message_id, "text": text, "reply_markup": {"inline_keyboard": keyboard}}


def again(message: dict[str, object], kind: str, message_id: int) -> dict[str, object]:
    """What rings a nag again: a reminder of an ask (with its buttons), a shout's repeat."""
    text = str(message["text"]).removeprefix("URGENT: ")
    head = f'Reminder 1 of 2: request #5 "{text}" has waited 2 s' if kind == "remind" else (
        f"URGENT, again (ring 2, waiting 0 min): {text}")  # fmt: skip
    return {**message, "message_id": message_id, "text": head}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("rows", [80, 150, 1000])
def test_every_seed_files_and_leaves_ringing_each_nag_the_run_checks(seed: int, rows: int) -> None:
    """The seed sweep: whatever the seed, the plan files a deadline, two reminded requests and
    two shouts, and the owner's taps never end one before what the run must see of it rang (a
    deadline request is never tapped, a reminded one only after its reminder, a shout only
    after its repeat). Pure: the owner is fed the chat as the emulator would show it."""
    rng = random.Random(seed)
    kinds = nags.plan_kinds(rng, nags.nag_count(rows))
    counted = Counter(kinds)
    assert counted["deadline"] >= 1, kinds
    assert counted["remind"] >= 2, kinds
    assert counted["shout"] >= 2, kinds
    owner = Owner("http://127.0.0.1:9", random.Random(seed), ack_within_s=nags.EXPIRE_S / 2)
    try:
        owner.rng = ProbablyTaps(seed)  # every decision that may tap, taps
        chat = [first_ring(f"nag nag.1-{i}", kind, i + 1) for i, kind in enumerate(kinds)]
        owner._decide(chat)
        decided = {tap.label for tap in owner.due}
        for i, kind in enumerate(kinds):
            name = f"nag nag.1-{i}"
            assert (name in decided) is (kind == "urgent"), (kind, sorted(decided))
        later = [again(chat[i], kind, 100 + i) for i, kind in enumerate(kinds)
                 if kind in ("remind", "shout")]  # fmt: skip
        owner._decide(chat + later)
        decided = {tap.label for tap in owner.due}
        for i, kind in enumerate(kinds):
            assert (f"nag nag.1-{i}" in decided) is (kind != "deadline"), (kind, sorted(decided))
    finally:
        owner.phone.close()


class ProbablyTaps(random.Random):
    """The owner's seeded choices with every share met: each "whether" says yes."""

    def random(self) -> float:
        return 0.0


def test_the_kinds_whose_ring_never_came_are_filed_again_after_the_cuts() -> None:
    """`unrung`: what the run files once more after the cuts, when they took every ring of it."""
    asked = {"text": "request #5 from prover: nag nag.1-0 [remind]: may I (approve / decline)"}
    shout = {"text": "URGENT: nag nag.1-1 [shout]: the freezer is warm"}
    reminder = {"text": 'Reminder 1 of 2: request #5 "nag nag.1-0 [remind]: may I" has waited 2 s'}
    repeat = {"text": f"{REPEAT_MARKER}URGENT, again (ring 2, waiting 0 min): {shout['text'][8:]}"}
    assert nags.unrung([asked, shout]) == ["remind", "shout"]
    assert nags.unrung([asked, shout, reminder]) == ["shout"]
    assert nags.unrung([asked, shout, reminder, repeat]) == []
