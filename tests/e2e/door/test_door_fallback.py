"""The fallback channel end to end (issue 35, rung 3): `chief serve` and the Bot API emulator as
real processes (tests.support.stack), a real SMTP server (aiosmtpd, on a loopback ephemeral port)
behind the door's `mailto://` fallback URL, the delay compressed by its settings (the test-only
CHIEF_TEST_URGENT_SHORT lets CHIEF_FALLBACK_AFTER_S go down to 2 s).

With the owner blocking the bot (the emulator refusing every send to their chat, 403) for longer
than the delay, the mail server receives each urgent report exactly once and ONE "Telegram is
down" message, not one per queued row; the door's status, `coop status` and /metrics say so;
once the owner unblocks the bot (Telegram's `my_chat_member` update wakes the sender, which
would else retry a refused send only once a minute), ONE Telegram message lists what went by
mail within seconds, and /status on the phone says what the fallback did."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from chief.fallback_rules import NOTICE_SUBJECT, POSSIBLE_REPEAT
from tests.support.fallback_stack import WAIT_S, FallbackStack, fallback_stack, subjects
from tests.support.ledger import made_ledger
from tests.support.phone import EmulatorOwner
from tests.support.procs import coop
from tests.support.stack import CHAT_ID

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

BACK = "Telegram is back"
OWNER_ID = int(CHAT_ID)


@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FallbackStack]:
    with fallback_stack(tmp_path_factory.mktemp("fallback")) as stack:
        yield stack


def test_a_blocked_bot_sends_each_urgent_report_once_by_mail_and_one_notice_then_one_summary(
    fallback: FallbackStack,
) -> None:
    fallback.block_telegram()
    plain = f"plants watered {uuid.uuid4().hex[:6]}"
    first = f"the freezer is warm {uuid.uuid4().hex[:6]}"
    second = f"water in the cellar {uuid.uuid4().hex[:6]}"
    fallback.post(plain)
    fallback.post(first, urgent=True)
    fallback.post(second, urgent=True)
    mails = fallback.mail.wait_for(
        lambda found: (
            any(first in s for s in subjects(found))
            and any(second in s for s in subjects(found))
            and found
        ),
        WAIT_S,
        "both urgent reports by mail",
    )
    # Everything owed is sent (none waits): then the mail server's count is the whole story.
    fallback.mail.wait_for(
        lambda _: fallback.status()["waiting"] == 0 and fallback.status()["sent"] == 3,
        WAIT_S,
        "the fallback's three sends marked",
    )
    mails = fallback.mail.messages()
    notices = [m for m in mails if m.subject.startswith(NOTICE_SUBJECT)]
    assert len(notices) == 1, subjects(mails)  # one per outage, not one per queued row
    assert "Forbidden: bot was blocked by the user" in notices[0].body
    assert "3 report(s) wait" in notices[0].body
    for text in (first, second):
        (report,) = [m for m in mails if text in m.subject]
        assert report.subject == f"URGENT: {text}"
        assert "chief ack " in report.body
        assert "Got it" in report.body
        assert POSSIBLE_REPEAT not in report.body
    assert len(mails) == 3, subjects(mails)
    assert not any(plain in m.subject or plain in m.body for m in mails)  # urgent ones only
    status = fallback.status()
    assert status["telegram_failing_since"] is not None
    assert "blocked" in status["telegram_failing_why"]
    assert fallback.metric("coop_fallback_sends_total", "sent") == 3
    assert fallback.metric("coop_fallback_sends_total", "failed") == 0
    # Both reports climbed to rung 3 of their ladder, once each, and say so where they ring.
    assert fallback.metric("coop_escalations_total", "3", label="rung") == 2
    rungs = {row["text"].removeprefix("URGENT: "): row["rung"]
             for row in fallback.stack.door_status()["urgent"]["ringing"]}  # fmt: skip
    assert (rungs[first], rungs[second]) == (3, 3), rungs
    made_ledger(Path(fallback.stack.env()["COOP_DB"]).parent)  # a read creates none
    shown = coop("status", env=fallback.stack.env())
    assert "fallback: Telegram failing since" in shown.stdout, shown.stdout
    assert "3 sent" in shown.stdout, shown.stdout

    # The bot unblocked: its `my_chat_member` update wakes the sender at once (not at its 60 s
    # backoff, past this bound), and one message lists the mail.
    fallback.unblock_telegram()
    backs = fallback.mail.wait_for(
        lambda _: [t for t in fallback.telegram_texts() if t.startswith(BACK)],
        WAIT_S,
        "the Telegram message listing what went by mail",
    )
    assert len(backs) == 1
    assert first in backs[0]
    assert second in backs[0]
    assert NOTICE_SUBJECT in backs[0]
    fallback.mail.wait_for(
        lambda _: fallback.status()["telegram_failing_since"] is None, WAIT_S, "the outage over"
    )
    assert len(fallback.mail.messages()) == 3  # nothing more by mail
    assert len([t for t in fallback.telegram_texts() if t.startswith(BACK)]) == 1
    # /status on the phone says what the fallback did.
    owner = EmulatorOwner(fallback.stack.emulator.url)
    owner.text(OWNER_ID, OWNER_ID, "/status")
    owner.wait_for(
        lambda _: [t for t in fallback.telegram_texts()
                   if "Fallback channel: standing by (3 sent in all, 0 waiting)" in t],
        WAIT_S,
        "/status naming the fallback",
    )  # fmt: skip
    owner.close()
