"""The pure rules of an ask's deadline and reminders (chief.reminder_rules), and how the door
rules a due reminder (chief.phone.reminders): its words, its schedule, its hold through the
quiet hours and the owner's /quiet, its end at the deadline."""

from __future__ import annotations

from datetime import datetime, time
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from chief.phone.commands_text import QuietOverride
from chief.phone.pacing import QuietHours
from chief.phone.reminders import Reminders, quiet_until
from chief.reminder_rules import (
    Deadline,
    DueReminder,
    clock_time,
    deadline_line,
    deadline_toast,
    next_due,
    reminder_text,
    waited,
    with_deadline,
)
from chief.store.reminders import End, Hold, Ring

ROME = ZoneInfo("Europe/Rome")
NOON = datetime(2026, 12, 3, 12, 0, tzinfo=ROME).timestamp()  # a Thursday


def test_the_deadline_is_said_in_local_time_with_its_day_when_not_today() -> None:
    assert clock_time(NOON + 6 * 3600, NOON, ROME) == "18:00"
    assert clock_time(NOON + 24 * 3600, NOON, ROME) == "Fri 12:00"
    assert clock_time(NOON + 30 * 24 * 3600, NOON, ROME) == "Sat 2 Jan 12:00"
    deadline = Deadline(NOON + 6 * 3600, "decline")
    assert deadline_line(deadline, NOON, ROME) == "if no answer by 18:00: decline"
    assert deadline_line(Deadline(NOON + 60), NOON, ROME) == "if no answer by 12:01: abandoned"
    assert with_deadline("pay?", deadline, NOON, ROME) == "pay?\nif no answer by 18:00: decline"
    # A default named by its choice after the words, so a choice named "no" reads as one.
    assert deadline_line(Deadline(NOON + 60, "no"), NOON, ROME) == "if no answer by 12:01: no"
    assert with_deadline("pay?", None, NOON, ROME) == "pay?"


def test_waited_reads_as_the_owner_reads_it() -> None:
    assert [waited(s) for s in (0, 45, 61, 3600, 5400, 49 * 3600)] == [
        "0 s", "45 s", "1 min", "1 h", "1 h 30 min", "2 d 1 h",
    ]  # fmt: skip


def test_a_reminder_starts_with_reminder_and_says_how_long_it_waited() -> None:
    due = DueReminder("q-1", 5, "pay the plumber", 2, 3, 2700, NOON, NOON + 5400)
    assert reminder_text(due, NOON + 5400, ROME) == (
        'Reminder 2 of 3: request #5 "pay the plumber" has waited 1 h 30 min'
    )
    with_one = DueReminder(
        "q-1", 5, "pay", 1, 3, 60, NOON, NOON + 60, Deadline(NOON + 6 * 3600, "decline")
    )
    assert reminder_text(with_one, NOON + 60, ROME).endswith("\nif no answer by 18:00: decline")


@given(
    rung=st.integers(0, 10),
    most=st.integers(1, 10),
    every=st.floats(1, 1e6),
    deadline=st.one_of(st.none(), st.floats(0, 2e7)),
)
def test_the_next_reminder_is_bounded_in_count_and_never_at_or_after_the_deadline(
    rung: int, most: int, every: float, deadline: float | None
) -> None:
    at = next_due(rung, most, 1e6, every, None if deadline is None else 1e6 + deadline)
    if at is not None:
        assert rung < most
        assert at == 1e6 + every
        assert deadline is None or at < 1e6 + deadline
    else:
        assert rung >= most or (deadline is not None and 1e6 + every >= 1e6 + deadline)


def test_a_late_taps_toast_says_what_the_deadline_decided() -> None:
    at = NOON + 6 * 3600
    assert deadline_toast(at, "closed", "decline", at + 60, ROME).startswith(
        "The deadline decided this at 18:00: decline"
    )
    assert deadline_toast(at, "abandoned", None, at + 60, ROME).startswith(
        "The deadline decided this at 18:00: abandoned"
    )
    assert deadline_toast(None, "closed", None, at, ROME).startswith(
        "The deadline decided this: closed"
    )


def test_quiet_holds_until_both_the_hours_and_the_owners_quiet_end() -> None:
    hours = QuietHours(time(22, 0), time(7, 0), ROME)
    night = datetime(2026, 12, 3, 23, 0, tzinfo=ROME).timestamp()
    seven = datetime(2026, 12, 4, 7, 0, tzinfo=ROME).timestamp()
    assert quiet_until(NOON, hours, QuietOverride()) is None
    assert quiet_until(night, hours, QuietOverride()) == seven
    # /quiet past the hours' end holds on; /quiet into the hours holds until they end
    assert quiet_until(night, hours, QuietOverride(seven + 600)) == seven + 600
    evening = datetime(2026, 12, 3, 21, 30, tzinfo=ROME).timestamp()
    assert quiet_until(evening, hours, QuietOverride(evening + 3600)) == seven
    assert quiet_until(NOON, None, QuietOverride(NOON + 60)) == NOON + 60


def test_the_door_holds_rings_or_ends_a_due_reminder() -> None:
    due = DueReminder("q-1", 5, "pay", 1, 3, 60, NOON, NOON + 60, Deadline(NOON + 150))
    reminders = Reminders(None, quiet=QuietOverride(), zone=ROME)  # type: ignore[arg-type]
    step = reminders.plan(NOON + 60)(due)
    assert isinstance(step, Ring)
    assert step.next_at == NOON + 120
    last = reminders.plan(NOON + 100)(due)
    assert isinstance(last, Ring)
    assert last.next_at is None  # the next would fall after the deadline
    assert reminders.plan(NOON + 150)(due) == End("deadline")
    reminders.quiet.until = NOON + 100
    assert reminders.plan(NOON + 60)(due) == Hold(NOON + 100)
    reminders.quiet.until = NOON + 200  # holds past the deadline: none rings
    assert reminders.plan(NOON + 60)(due) == End("deadline")


def test_a_reminder_waits_while_the_asks_last_message_is_still_queued() -> None:
    due = DueReminder("q-1", 5, "pay", 2, 3, 60, NOON, NOON + 120, None, still_queued=True)
    reminders = Reminders(None, quiet=QuietOverride(), zone=ROME)  # type: ignore[arg-type]
    assert reminders.plan(NOON + 120)(due) == Hold(NOON + 180, recheck=False)
