"""The fallback channel's hourly bound (issue 35, rung 3): with CHIEF_FALLBACK_MAX_PER_HOUR=2 and
the emulator refusing every send (403), the mail server receives the outage's notice and ONE
digest carrying every urgent report still waiting (the hour's last message), and nothing more
within the hour: a report filed after that waits, counted in the door's status."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from chief.fallback_rules import NOTICE_SUBJECT
from tests.support.fallback_stack import WAIT_S, FallbackStack, fallback_stack, subjects

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def fallback(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FallbackStack]:
    folder = tmp_path_factory.mktemp("fallback-hourly")
    with fallback_stack(folder, CHIEF_FALLBACK_MAX_PER_HOUR="2") as stack:
        yield stack


def test_the_hours_last_message_carries_every_report_waiting_and_then_none_goes(
    fallback: FallbackStack,
) -> None:
    fallback.block_telegram()
    texts = [f"alarm {n} {uuid.uuid4().hex[:6]}" for n in range(3)]
    for text in texts:
        fallback.post(text, urgent=True)
    fallback.mail.wait_for(
        lambda found: len(found) >= 2 and fallback.status()["waiting"] == 0,
        WAIT_S,
        "two messages and nothing waiting",
    )
    notice, digest = fallback.mail.messages()
    assert notice.subject.startswith(NOTICE_SUBJECT)
    assert digest.subject == f"URGENT: {texts[0]} (+2 more)"
    assert all(text in digest.body for text in texts)
    later = f"alarm late {uuid.uuid4().hex[:6]}"
    fallback.post(later, urgent=True)
    # Queued at the next look, and held: the hour's two messages are spent.
    fallback.mail.wait_for(
        lambda _: fallback.status()["waiting"] == 1, WAIT_S, "the late report queued"
    )
    status = fallback.status()
    assert status["sent_last_hour"] == 2
    assert len(fallback.mail.messages()) == 2, subjects(fallback.mail.messages())
