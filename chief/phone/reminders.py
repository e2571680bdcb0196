"""The phone's reminders (issue 28): an ask with `remind` rings again while it is open, a
`DueRings` source of the nag task (`chief.phone.jobqueue`).

    the schedule      made in chief.db with the ask's first sent mark (`chief.store.reminders`):
                      the first due `every_s` after the ask first rang
    a due reminder    ruled here (`plan`), queued and moved on in ONE chief.db transaction:
                      at or after the deadline     ended: none rings
                      quiet hours, or /quiet       held until both end (a reminder is never
                                                   rung silently), then rung
                      the ask's last message       held `every_s` more: Telegram is behind,
                      still queued                 and reminders do not pile up behind it
                      otherwise                    queued on the Telegram queue as an entry of
                                                   the ask: alone (never in a digest), with its
                                                   live buttons, as a reply to its first
                                                   message (`Reminder 2 of 3: request #5 ...
                                                   has waited 1 h 30 min`), paced with the
                                                   chat's other messages; the next due
                                                   `every_s` later, none past `max`
    a settle          ends the schedule and drops a queued reminder in its own transaction
                      (`chief.store.asks.void_ask`): never rung after its settle
    the deadline      a reminder still queued when its ask's deadline comes (the chat's pacing
                      behind a backlog, an outage) is handed to no sender after it, and the
                      next turn takes it off the queue (`chief.store.telegram.STALE_REMINDER`)

The message a reminder rang is remembered against its ask (`ask_messages`), so a tap on it
decides the ask once and a settle edits it too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from chief.phone.commands_text import QuietOverride
from chief.phone.jobqueue import Due
from chief.phone.pacing import QuietHours
from chief.reminder_rules import DueReminder, next_due, reminder_text

if TYPE_CHECKING:  # the store loads when the door starts
    from chief.store import ChiefStore
    from chief.store.reminders import Step

# The quiet hours and the owner's /quiet may follow each other: looked through this many times.
QUIET_LOOKS = 4


def quiet_hours_end(now: float, hours: QuietHours) -> float:
    """When the quiet hours holding at `now` end (epoch seconds): the window's end, today or
    tomorrow, in the owner's zone."""
    local = datetime.fromtimestamp(now, UTC).astimezone(hours.zone)
    end = local.replace(hour=hours.end.hour, minute=hours.end.minute, second=0, microsecond=0)
    if end <= local:
        end += timedelta(days=1)
    return end.timestamp()


def quiet_until(now: float, hours: QuietHours | None, quiet: QuietOverride) -> float | None:
    """When neither the quiet hours nor the owner's /quiet hold any longer, or None when
    neither holds at `now`."""
    until = now
    for _ in range(QUIET_LOOKS):
        ends = []
        if quiet.holds(until) and quiet.until is not None:
            ends.append(quiet.until)
        if hours is not None and hours.is_quiet(datetime.fromtimestamp(until, UTC)):
            ends.append(quiet_hours_end(until, hours))
        if not ends:
            break
        until = max(ends)
    return None if until == now else until


class Reminders:
    """The reminders' `DueRings` source over chief.db, and their part of the door's status."""

    def __init__(
        self,
        store: ChiefStore,
        *,
        quiet_hours: QuietHours | None = None,
        quiet: QuietOverride | None = None,
        zone: tzinfo | None = None,
    ) -> None:
        self.store = store
        self.quiet_hours = quiet_hours
        self.quiet = quiet or QuietOverride()
        self.zone = zone  # None: the door's local time, in a reminder's words

    def plan(self, now: float) -> Callable[[DueReminder], Step]:
        """What becomes of each reminder due at `now` (see the module docstring)."""
        from chief.store.reminders import End, Hold, Ring

        def step(due: DueReminder) -> Step:
            deadline_at = None if due.deadline is None else due.deadline.at
            if deadline_at is not None and now >= deadline_at:
                return End("deadline")
            held = quiet_until(now, self.quiet_hours, self.quiet)
            if held is not None:
                if deadline_at is not None and held >= deadline_at:
                    return End("deadline")
                return Hold(held)
            if due.still_queued:  # Telegram is behind: one waiting message of the ask is enough
                return Hold(now + due.every_s, recheck=False)
            text = reminder_text(due, now, self.zone)
            return Ring(text, next_due(due.number, due.max, now, due.every_s, deadline_at))

        return step

    async def ring_due(self, now: float) -> Due:
        queued, next_at = await self.store.ring_due_reminders(now, self.plan(now))
        return Due(queued, next_at)

    async def status(self) -> dict[str, Any]:
        """`{"scheduled": N, "next": {"request_id", "ask_key", "due_at"} | null}`."""
        scheduled, soonest = await self.store.reminders_status()
        upcoming = None
        if soonest is not None:
            upcoming = {
                "request_id": soonest.request_id,
                "ask_key": soonest.ask_key,
                "due_at": soonest.due_at,
            }
        return {"scheduled": scheduled, "next": upcoming}
