"""The fallback channel end to end (issue 35, rung 3): `chief serve` and the Bot API emulator as
real processes (tests.support.stack), a real SMTP server (aiosmtpd, on a loopback ephemeral port)
behind the door's `mailto://` fallback URL, the delay compressed by its settings (the test-only
CHIEF_TEST_URGENT_SHORT lets CHIEF_FALLBACK_AFTER_S go down to 2 s).

With the emulator refusing every send (403, a bot the owner blocked) for longer than the delay,
the mail server receives each urgent report exactly once and ONE "Telegram is down" message, not
one per queued row; the door's status, `coop status` and /metrics say so; once the emulator
takes messages again (the sender retries a refused send once a minute), ONE Telegram message
lists what went by mail."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chief.fallback_rules import NOTICE_SUBJECT, POSSIBLE_REPEAT
from tests.support.procs import coop
from tests.support.smtp import Mail, SmtpServer, smtp_server
from tests.support.stack import NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER, Stack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

AFTER_S = 2.0
WAIT_S = 30.0
# The sender tries a refused send again at its backoff cap (60 s): the recovery waits that long.
RECOVERY_S = 60.0 * 1.2 + WAIT_S
BACK = "Telegram is back"


class Fallback:
    def __init__(self, stack: Stack, mail: SmtpServer) -> None:
        self.stack = stack
        self.mail = mail

    def post(self, text: str, **extras: Any) -> str:
        outbox_id = "d-" + uuid.uuid4().hex
        body = {"text": text, "kind": "notify", "outbox_id": outbox_id, **extras}
        answer = self.stack.door_request(
            "POST", NOTIFY_PATH, json=body, headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        return outbox_id

    def status(self) -> dict[str, Any]:
        return dict(self.stack.door_status()["fallback"])

    def metric(self, name: str, result: str) -> float:
        answer = self.stack.door_request(
            "GET", "/metrics", headers={SERVICE_KEY_HEADER: SERVICE_KEY}, timeout=WAIT_S
        )
        wanted = f'{name}{{result="{result}"}} '
        for line in answer.text.splitlines():
            if line.startswith(wanted):
                return float(line.split()[1])
        raise AssertionError(f"{wanted} not in the door's /metrics")

    def telegram_texts(self) -> list[str]:
        url = f"{self.stack.emulator.url}/emulator/messages"
        with httpx.Client(timeout=WAIT_S, trust_env=False) as client:
            answer = client.get(url)
        assert answer.status_code == 200, answer.text
        return [str(m["text"]) for m in answer.json()["messages"]]


def subjects(mails: list[Mail]) -> list[str]:
    return [mail.subject for mail in mails]


@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fallback]:
    folder = tmp_path_factory.mktemp("fallback")
    with smtp_server() as mail:
        settings = {
            "CHIEF_TEST_URGENT_SHORT": "1",
            "CHIEF_URGENT_RERING_S": "1",
            "CHIEF_URGENT_EXPIRE_S": "600",
            "CHIEF_FALLBACK_URLS": mail.mailto_url(),
            "CHIEF_FALLBACK_AFTER_S": str(AFTER_S),
        }
        stack = Stack(folder, door_env=settings)
        try:
            stack.start_door()
            stack.door.wait_event("door.fallback_configured", "the fallback configured")
            yield Fallback(stack, mail)
        finally:
            stack.stop()
            stack.close()


def test_a_blocked_bot_sends_each_urgent_report_once_by_mail_and_one_notice_then_one_summary(
    fallback: Fallback,
) -> None:
    fallback.stack.arm_telegram_fault(mode="bot_blocked", count=10_000)
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
    assert "Forbidden: bot was blocked by the user" in notices[0].subject
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
    shown = coop("status", env=fallback.stack.env())
    assert "fallback: Telegram failing since" in shown.stdout, shown.stdout
    assert "3 sent" in shown.stdout, shown.stdout

    # The bot unblocked: the sender's next try goes through, and one message lists the mail.
    # (The armed faults swapped for one on a method the door never calls.)
    fallback.stack.arm_telegram_fault(mode="5xx", methods=["logOut"], replace=True)
    backs = fallback.mail.wait_for(
        lambda _: [t for t in fallback.telegram_texts() if t.startswith(BACK)],
        RECOVERY_S,
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
