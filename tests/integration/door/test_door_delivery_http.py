"""Delivery through the door over real HTTP: the Chief line and the Telegram entry accepted in one
transaction, the sender task ringing once per outbox row (python-telegram-bot against the
emulator), and Telegram's refusals kept inside the door: the engine always gets 200."""

from __future__ import annotations

import time
import uuid

import pytest
from structlog.testing import capture_logs

from chief.telegram.emulator import parse_fault
from tests.integration.door.conftest import LiveDoor
from tests.support.door import body
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def test_door_lands_in_chief_then_rings_once(door: LiveDoor) -> None:
    outbox_id = new_id()
    document = body(outbox_id, text=f"todo {outbox_id} done")
    first = door.notify(document)
    assert first.status_code == 200
    answer = first.json()
    assert answer["delivered"] is True
    assert answer["channel"] == "telegram"
    assert answer["outbox_id"] == outbox_id
    assert isinstance(answer["chief_message_id"], int)
    assert answer["telegram"] in {"sent", "queued"}
    assert "already_sent" not in answer
    door.wait_rung(document["text"])
    door.wait_marked(outbox_id)
    second = door.notify(document).json()
    assert second["already_sent"] is True
    assert second["telegram"] == "sent"
    assert isinstance(second["telegram_message_id"], int)
    assert second["chief_message_id"] == answer["chief_message_id"]
    assert door.rung(document["text"]) == 1
    assert door.chief_lines(outbox_id) == 1


def test_door_without_outbox_id_rings_telegram_alone(door: LiveDoor) -> None:
    _, messages, queued, sent = door.written()
    text = f"plain notice {new_id()}"
    response = door.notify(body(None, text=text))
    assert response.json()["chief_message_id"] is None
    door.wait_rung(text)
    assert door.written()[1:] == (messages, queued, sent)


def test_door_rate_limited_send_is_queued_and_retried_after_retry_after(door: LiveDoor) -> None:
    outbox_id = new_id()
    document = body(outbox_id, text=f"rate limited {outbox_id}")
    door.emulator.arm(parse_fault({"mode": "429", "retry_after": 2, "count": 1}))
    with capture_logs() as logs:
        accepted = door.notify(document)
        asked = time.monotonic()
        assert accepted.status_code == 200, accepted.text
        # The Chief line is in; Telegram's refusal stays inside the door.
        assert door.chief_lines(outbox_id) == 1
        door.wait_rung(document["text"])
        waited_s = time.monotonic() - asked
    failed = [e for e in logs if e["event"] == "door.send_failed"]
    assert [(e["delivery_keys"], e["retry_after_s"]) for e in failed] == [([outbox_id], 2.0)]
    assert waited_s >= 1.9
    assert door.rung(document["text"]) == 1
    door.wait_marked(outbox_id)
    assert door.notify(document).json()["already_sent"] is True
    assert door.rung(document["text"]) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_door_server_error_from_telegram_is_retried_by_the_door(
    door: LiveDoor, status: int
) -> None:
    outbox_id = new_id()
    text = f"server error {status} {outbox_id}"
    door.emulator.arm(parse_fault({"mode": "5xx", "status": status}))
    accepted = door.notify(body(outbox_id, text=text))
    assert accepted.status_code == 200
    assert accepted.json()["telegram"] == "queued"
    door.wait_rung(text)
    assert door.rung(text) == 1


def test_door_telegram_reply_after_the_deadline_is_awaited_and_rings_once(door: LiveDoor) -> None:
    """A send that reached Telegram and whose answer came after the deadline (1 s here), inside
    the late-reply bound, is still awaited: a late reply is not a lost one. Its answer marks the
    row sent, and the phone rings once (the emulator keeps a delayed message as received)."""
    outbox_id = new_id()
    document = body(outbox_id, text=f"slow telegram {outbox_id}")
    door.emulator.arm(parse_fault({"mode": "delay", "delay_s": 1.5}))
    assert door.notify(document).status_code == 200
    door.wait_marked(outbox_id)
    assert door.notify(document).json()["already_sent"] is True
    assert door.rung(document["text"]) == 1
    assert door.chief_lines(outbox_id) == 1


def test_door_status_reports_counts_posture_telegram_and_its_queue(door: LiveDoor) -> None:
    text = f"status {new_id()}"
    door.notify(body(new_id(), text=text))
    door.wait_rung(text)
    wait_until_sync(lambda: door.status()["telegram_queue"]["depth"] == 0, timeout_s=10)
    status = door.status()
    assert status["posture"] == "normal"
    assert status["telegram_configured"] is True
    assert status["undelivered_reports"] == 0
    assert status["sent_count"] == door.written()[3]
    assert status["notify_in_flight"] == 0
    assert isinstance(status["uptime_s"], float)
    assert status["uptime_s"] > 0
    queue = status["telegram_queue"]
    assert queue["oldest_age_s"] is None
    assert queue["next_attempt_in_s"] is None
    assert queue["unmarked_sends"] == 0
    assert queue["messages_sent"] >= 1


def test_door_emulator_log_is_inspectable_over_http(door: LiveDoor) -> None:
    outbox_id = new_id()
    door.notify(body(outbox_id, text=f"inspect {outbox_id}"))
    door.wait_rung(f"inspect {outbox_id}")
    messages = door.client.get(door.emulator_url + "/emulator/messages").json()["messages"]
    assert f"inspect {outbox_id}" in messages[-1]["text"]
    assert messages[-1]["chat_id"] == 4242
    assert messages[-1]["disable_notification"] is False
    wait_until_sync(lambda: door.status()["notify_in_flight"] == 0, timeout_s=5)


def test_door_cuts_a_wide_text_for_telegram_and_keeps_it_whole_in_the_chief(
    door: LiveDoor,
) -> None:
    outbox_id = new_id()
    wide = "🌱" * 4000  # 4,000 characters the door accepts, 8,000 UTF-16 units for Telegram
    response = door.notify(body(outbox_id, text=wide))
    assert response.status_code == 200, response.text
    assert door.chief_lines(outbox_id) == 1
    wait_until_sync(lambda: any(t.startswith("🌱") for t in door.emulator.texts()), timeout_s=10)
    (sent,) = [text for text in door.emulator.texts() if text.startswith("🌱")]
    assert len(sent.encode("utf-16-le")) // 2 <= 4096
    assert sent.endswith("[cut for Telegram; the whole line is in the Master Chief]")


def test_an_outage_of_several_failed_sends_is_one_line_and_its_end_another(door: LiveDoor) -> None:
    """Telegram failing two sends in a row is one outage: one `door.send_failed` line when it
    starts and one `door.send_recovered` (how many sends failed, for how long) when a send goes
    through again, never a line per try."""
    outbox_id = new_id()
    text = f"outage {outbox_id}"
    door.emulator.arm(parse_fault({"mode": "5xx", "status": 502, "count": 2}))
    with capture_logs() as logs:
        assert door.notify(body(outbox_id, text=text)).status_code == 200
        door.wait_rung(text)
        wait_until_sync(
            lambda: any(e["event"] == "door.send_recovered" for e in logs),
            timeout_s=10,
            what="the outage's end logged",
        )
    events = [e["event"] for e in logs if e["event"].startswith("door.send_")]
    assert events == ["door.send_failed", "door.send_recovered"]
    (recovered,) = [e for e in logs if e["event"] == "door.send_recovered"]
    assert recovered["failed_sends"] == 2
    assert door.rung(text) == 1
