"""The Telegram emulator (`chief telegram-emulator`, as `ops/run` starts it) is guarded like the
door: a browser page cannot drive its control endpoints (no foreign Origin or Host, no
cross-site form post, no `Sec-Fetch-Site: cross-site`), and DNS rebinding cannot read the
messages it kept. python-telegram-bot's calls (no Origin, a loopback Host, a form body) still
work, and its receipt log is private (0600) whatever the umask.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator

import httpx
import pytest

from tests.support.procs import Service, clean_env

TOKEN = "123:emulator-guard"
CHAT = 4242


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One emulator process for the module (each start is ~0.7 s of CPU in imports)."""
    folder = tmp_path_factory.mktemp("emulator")
    service = Service(
        "emulator",
        [
            "chief",
            "telegram-emulator",
            "--host",
            "127.0.0.1",
            "--token",
            TOKEN,
            "--log",
            str(folder / "receipts.jsonl"),
        ],
        folder,
        "emulator.listening",
        clean_env(folder),
        keep_port=False,
    )
    old_umask = os.umask(0o022)  # a loose umask, as a login shell has: the log must not follow it
    try:
        service.start()
    finally:
        os.umask(old_umask)
    try:
        yield service
    finally:
        service.terminate()


@pytest.fixture
def emulator(started: Service) -> Service:
    """The module's emulator with its messages, updates and faults forgotten
    (`/emulator/reset`, a JSON control call from a loopback client: allowed)."""
    answer = httpx.post(f"{started.url}/emulator/reset", json={})
    assert answer.status_code == 200, answer.text
    return started


def _send_as_the_bot(url: str) -> None:
    """A sendMessage as python-telegram-bot sends it: a form body, a loopback Host, no Origin."""
    markup = json.dumps({"inline_keyboard": [[{"text": "approve", "callback_data": "a"}]]})
    answer = httpx.post(
        f"{url}/bot{TOKEN}/sendMessage",
        data={"chat_id": str(CHAT), "text": "may I?", "reply_markup": markup},
    )
    assert answer.status_code == 200, answer.text


PRESS = {"chat_id": CHAT, "user_id": CHAT, "text": "approve"}


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example", "Host": "evil.example"},
        {"Host": "evil.example"},
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Cookie": "session=1"},
        {"X-Forwarded-For": "203.0.113.9"},
    ],
    ids=["origin-and-host", "host", "origin", "sec-fetch-cross-site", "cookie", "forwarded"],
)
def test_a_cross_site_press_is_refused_and_presses_nothing(
    emulator: Service, headers: dict[str, str]
) -> None:
    _send_as_the_bot(emulator.url)
    answer = httpx.post(f"{emulator.url}/emulator/owner/press", json=PRESS, headers=headers)
    assert answer.status_code == 403, answer.text
    pending = httpx.get(f"{emulator.url}/emulator/updates").json()["pending"]
    assert pending == [], "a refused press still queued an update for the bot"


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_a_form_post_to_a_control_endpoint_is_refused(
    emulator: Service, content_type: str | None
) -> None:
    """What a page may post without a preflight (text/plain, a form) never plays an update."""
    _send_as_the_bot(emulator.url)
    headers = {} if content_type is None else {"Content-Type": content_type}
    answer = httpx.post(
        f"{emulator.url}/emulator/owner/press", content=json.dumps(PRESS), headers=headers
    )
    assert answer.status_code == 415, answer.text
    assert httpx.get(f"{emulator.url}/emulator/updates").json()["pending"] == []


def test_a_foreign_host_reads_no_message(emulator: Service) -> None:
    """DNS rebinding: a page whose name now points at 127.0.0.1 sends its own name as Host."""
    _send_as_the_bot(emulator.url)
    answer = httpx.get(f"{emulator.url}/emulator/messages", headers={"Host": "evil.example"})
    assert answer.status_code == 403, answer.text
    assert "may I?" not in answer.text


def test_the_bot_and_a_json_control_call_still_work(emulator: Service) -> None:
    _send_as_the_bot(emulator.url)
    pressed = httpx.post(f"{emulator.url}/emulator/owner/press", json=PRESS)
    assert pressed.status_code == 200, pressed.text
    updates = httpx.post(f"{emulator.url}/bot{TOKEN}/getUpdates", data={"timeout": "0"})
    assert updates.json()["result"][0]["callback_query"]["data"] == "a"
    messages = httpx.get(f"{emulator.url}/emulator/messages").json()["messages"]
    assert [m["text"] for m in messages] == ["may I?"]


def test_the_receipt_log_is_private(emulator: Service) -> None:
    _send_as_the_bot(emulator.url)
    log = emulator.folder / "receipts.jsonl"
    emulator.wait_for(log.exists, "the receipt log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
