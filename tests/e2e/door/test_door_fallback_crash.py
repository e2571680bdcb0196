"""A door killed in the fallback's send window (issue 35, rung 3): `chief serve` dies at the
fault points around the channel's send (plumbing.faults, as a SIGKILL would: no finally, no
flush), with the emulator refusing every send (403) and a real SMTP server behind the fallback.

Killed after the mail went out and before its mark, the next start sends it again with
"possibly a repeat" in its text; killed after the in-flight record and before the send, the
next start sends it (marked, since nobody can know); nothing is lost, nothing doubles
silently."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chief.fallback_rules import NOTICE_SUBJECT, POSSIBLE_REPEAT
from plumbing.faults import FAULT_EXIT_STATUS
from tests.support.fallback_stack import WAIT_S, FallbackStack, fallback_stack, subjects

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FallbackStack]:
    with fallback_stack(tmp_path_factory.mktemp("fallback-crash")) as stack:
        yield stack


def test_a_door_killed_in_the_send_window_neither_loses_nor_silently_doubles_a_send(
    fallback: FallbackStack,
) -> None:
    door = fallback.stack.door
    fallback.block_telegram()
    door.terminate()
    door.start(faults="door.fallback.after_send")
    text = f"boiler pressure low {uuid.uuid4().hex[:6]}"
    fallback.post(text, urgent=True)
    # The first send of the outage (its notice) reached the mail server; the door died before
    # its mark.
    assert door.wait_exit(WAIT_S) == FAULT_EXIT_STATUS
    assert [m.subject.startswith(NOTICE_SUBJECT) for m in fallback.mail.messages()] == [True]
    # Again, dead inside the window before anything went out: the notice, still in doubt.
    door.start(faults="door.fallback.before_send", wait=False)  # it dies as it starts
    assert door.wait_exit(WAIT_S) == FAULT_EXIT_STATUS
    assert len(fallback.mail.messages()) == 1
    door.start()
    fallback.mail.wait_for(
        lambda _: fallback.status()["waiting"] == 0 and fallback.mails_about(text),
        WAIT_S,
        "the report sent and nothing waiting",
    )
    mails = fallback.mail.messages()
    notices = [m for m in mails if m.subject.startswith(NOTICE_SUBJECT)]
    assert len(notices) == 2, subjects(mails)
    assert POSSIBLE_REPEAT not in notices[0].body
    assert notices[1].body.startswith(POSSIBLE_REPEAT)  # the one that may have gone twice
    (report,) = fallback.mails_about(text)  # lost neither to the kills nor doubled
    assert POSSIBLE_REPEAT not in report.body
    assert len(mails) == 3, subjects(mails)
    assert fallback.metric("coop_fallback_sends_total", "repeated") == 1
    assert fallback.metric("coop_fallback_sends_total", "sent") == 1
    assert door.events("door.fallback_in_doubt")
