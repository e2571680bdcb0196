"""Delivery through the door over real HTTP: Master Chief first, Telegram once per outbox row
(python-telegram-bot against the emulator), refused sends as 503 with Retry-After."""

from __future__ import annotations

import uuid

import pytest
from structlog.testing import capture_logs

from chief.telegram.emulator import parse_fault
from tests.integration.door.conftest import LiveDoor
from tests.integration.door.door_env import body
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.timeout(60)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def test_door_lands_in_chief_then_rings_once(door: LiveDoor) -> None:
    outbox_id = new_id()
    document = body(outbox_id, text=f"todo {outbox_id} done")
    with capture_logs() as logs:
        first = door.notify(document)
        second = door.notify(document)
    assert first.status_code == 200
    answer = first.json()
    assert answer["delivered"] is True
    assert answer["channel"] == "telegram"
    assert answer["outbox_id"] == outbox_id
    assert isinstance(answer["chief_message_id"], int)
    assert "already_sent" not in answer
    assert second.json() == answer | {"already_sent": True}
    assert door.emulator.texts().count(document["text"]) == 1
    assert door.chief_lines(outbox_id) == 1
    events = [(e["event"], e.get("outbox_id")) for e in logs if e["event"].startswith("door.")]
    assert events == [("door.delivered", outbox_id), ("door.already_sent", outbox_id)]
    delivered = next(e for e in logs if e["event"] == "door.delivered")
    assert delivered["telegram_message_id"] == door.emulator.messages[-1]["message_id"]


def test_door_without_outbox_id_rings_telegram_alone(door: LiveDoor) -> None:
    telegram, messages, queued, sent = door.written()
    response = door.notify(body(None, text="plain notice"))
    assert response.json()["chief_message_id"] is None
    assert door.written() == (telegram + 1, messages, queued, sent)


def test_door_rate_limited_send_answers_503_with_retry_after(door: LiveDoor) -> None:
    outbox_id = new_id()
    document = body(outbox_id, text=f"rate limited {outbox_id}")
    door.emulator.arm(parse_fault({"mode": "429", "retry_after": 3, "count": 1}))
    with capture_logs() as logs:
        refused = door.notify(document)
    assert refused.status_code == 503
    assert refused.json() == {"detail": "notification_channel_unavailable"}
    assert refused.headers["Retry-After"] == "3"
    failed = [e for e in logs if e["event"] == "door.send_failed"]
    assert [(e["outbox_id"], e["retry_after_s"]) for e in failed] == [(outbox_id, 3.0)]
    # The Chief line is in (it came first); the phone has not rung and nothing is marked.
    assert door.chief_lines(outbox_id) == 1
    assert document["text"] not in door.emulator.texts()
    # The engine's next call, after its wait, sends once; any later one rings nothing.
    retried = door.notify(document)
    assert retried.status_code == 200
    assert "already_sent" not in retried.json()
    assert door.notify(document).json()["already_sent"] is True
    assert door.emulator.texts().count(document["text"]) == 1
    assert door.chief_lines(outbox_id) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_door_server_error_from_telegram_answers_503(door: LiveDoor, status: int) -> None:
    outbox_id = new_id()
    door.emulator.arm(parse_fault({"mode": "5xx", "status": status}))
    refused = door.notify(body(outbox_id))
    assert (refused.status_code, refused.json()) == (
        503,
        {"detail": "notification_channel_unavailable"},
    )
    assert "Retry-After" not in refused.headers
    assert door.notify(body(outbox_id)).status_code == 200


def test_door_telegram_timeout_answers_503_and_the_retry_rings_again(door: LiveDoor) -> None:
    """A send that reached Telegram but whose answer came after the client timeout is, to the
    door, a failed send: the engine's retry rings a second time. Measured here, as the README's
    at-least-once promise says (the emulator keeps a delayed message as received)."""
    outbox_id = new_id()
    document = body(outbox_id, text=f"slow telegram {outbox_id}")
    door.emulator.arm(parse_fault({"mode": "delay", "delay_s": 1.5}))
    refused = door.notify(document)
    assert (refused.status_code, refused.json()) == (
        503,
        {"detail": "notification_channel_unavailable"},
    )
    assert door.notify(document).status_code == 200
    assert door.emulator.texts().count(document["text"]) == 2
    assert door.chief_lines(outbox_id) == 1


def test_door_status_reports_counts_posture_and_telegram(door: LiveDoor) -> None:
    door.notify(body(new_id()))
    status = door.status()
    assert status["posture"] == "normal"
    assert status["telegram_configured"] is True
    assert status["undelivered_reports"] == 0
    assert status["sent_count"] == door.written()[3]
    assert status["notify_locks"] == 0
    assert status["notify_in_flight"] == 0
    assert isinstance(status["uptime_s"], float)
    assert status["uptime_s"] > 0


def test_door_emulator_log_is_inspectable_over_http(door: LiveDoor) -> None:
    outbox_id = new_id()
    door.notify(body(outbox_id, text=f"inspect {outbox_id}"))
    messages = door.client.get(door.emulator_url + "/emulator/messages").json()["messages"]
    assert messages[-1]["text"] == f"inspect {outbox_id}"
    assert messages[-1]["chat_id"] == 4242
    wait_until_sync(lambda: door.status()["notify_in_flight"] == 0, timeout_s=5)


def test_door_cuts_a_wide_text_for_telegram_and_keeps_it_whole_in_the_chief(
    door: LiveDoor,
) -> None:
    outbox_id = new_id()
    wide = "🌱" * 4000  # 4,000 characters the door accepts, 8,000 UTF-16 units for Telegram
    response = door.notify(body(outbox_id, text=wide))
    assert response.status_code == 200, response.text
    assert door.chief_lines(outbox_id) == 1
    (sent,) = [text for text in door.emulator.texts() if text.startswith("🌱")]
    assert len(sent.encode("utf-16-le")) // 2 <= 4096
    assert sent.endswith("[cut for Telegram; the whole line is in the Master Chief]")
