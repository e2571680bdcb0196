"""Urgent reports end to end (issue 28): `chief serve` and the Bot API emulator as real
processes (tests.support.stack), rows posted to the door as the engine sends them (`urgent:
true`, and beside `ask`), the owner played through the emulator. One door for the module, its
interval compressed through the test-only CHIEF_TEST_URGENT_SHORT (1 s between rings), its
expiry far past anything a test waits for (a restart on a loaded machine takes seconds: a
report of another test must not expire under it); the expiry itself has a door of its own, 3 s
to expiry. The owner's /quiet is on for every door: an urgent report rings with sound through
it, rings again each interval with one live "Got it" on the phone, stops at "Got it" (a double
tap acknowledging once), at a reply, at its request's settle, and after its expiry (each with
one Chief line), and a SIGKILL between two repeats neither loses the next nor rings one twice.

Absence (no ring after a stop) is read behind a marker: a second urgent report filed after the
stop rings twice, which takes at least one interval, and every ring in that time is checked."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from chief.phone.pacing import REPEAT_MARKER
from tests.support.phone import EmulatorOwner
from tests.support.procs import coop
from tests.support.stack import CHAT_ID, NOTIFY_PATH, SERVICE_KEY, SERVICE_KEY_HEADER, Stack

NOTIFY_BATCH_PATH = "/api/coop/engine/notify-batch"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

OWNER_ID = int(CHAT_ID)
WAIT_S = 15.0
RERING_S = 1.0
EXPIRE_S = 3.0  # the expiry test's door
LONG_EXPIRE_S = 300.0  # the module's door: no report expires while a test runs
GOT_IT = "Got it"


class Urgent:
    """The module's stack, with the owner's phone and chief.db read beside the door."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.owner = EmulatorOwner(stack.emulator.url)

    def post(self, text: str, **extras: Any) -> str:
        """A notify row to the door, as the notifier posts one; its outbox id."""
        outbox_id = "d-" + uuid.uuid4().hex
        body = {"text": text, "kind": "notify", "outbox_id": outbox_id, **extras}
        answer = self.stack.door_request(
            "POST",
            NOTIFY_PATH,
            json=body,
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        )
        assert answer.status_code == 200, answer.text
        return outbox_id

    def post_batch(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A notify batch, as the notifier posts one (an outbox id per item); the answers."""
        body = {"items": [item | {"outbox_id": "d-" + uuid.uuid4().hex} for item in items]}
        answer = self.stack.door_request(
            "POST",
            NOTIFY_BATCH_PATH,
            json=body,
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        )
        assert answer.status_code == 200, answer.text
        return list(answer.json()["items"])

    def rings(self, text: str) -> list[dict[str, Any]]:
        """The bot's messages that rang the report `text` (its first ring and its repeats)."""
        return [
            m
            for m in self.owner.messages()
            if m["chat_id"] == OWNER_ID
            and m["text"].removeprefix(REPEAT_MARKER).startswith(("URGENT:", "URGENT, again"))
            and m["text"].split("\n\n")[0].endswith(text)
        ]

    def wait_rings(self, text: str, count: int) -> list[dict[str, Any]]:
        return self.owner.wait_for(
            lambda _: (found := self.rings(text)) and len(found) >= count and found,
            WAIT_S,
            f"{count} rings of {text!r}",
        )

    def got_it(self, text: str) -> None:
        """Tap "Got it" on the report's newest ring. A newer ring may take the button off the
        message between the read and the tap (the emulator then refuses the press, as a phone
        would have redrawn it): tap the newer one, a few times at most."""
        for _ in range(5):
            answer = self.press_as(OWNER_ID, self.rings(text)[-1], GOT_IT)
            if answer.status_code == 200:
                return
        raise AssertionError(f"no live Got it on {text!r}: {answer.text}")

    def press_as(self, user_id: int, message: dict[str, Any], label: str) -> httpx.Response:
        """`user_id` presses the button `label` on `message` in their private chat (the
        emulator refuses a button that chat does not show)."""
        body = {"chat_id": user_id, "user_id": user_id, "text": label,
                "message_id": message["message_id"]}  # fmt: skip
        return httpx.post(
            self.owner.base_url + "/emulator/owner/press", json=body, timeout=WAIT_S,
            trust_env=False,
        )  # fmt: skip

    def tap_as(self, user_id: int, message: dict[str, Any], token: str) -> None:
        """A callback query carrying `token` from `user_id`'s private chat, delivered as the Bot
        API would whether or not the button still shows (a tap the phone sent before an edit
        reached it, or a forged one)."""
        user = {"id": user_id, "is_bot": False, "first_name": "Someone"}
        chat = {"id": user_id, "type": "private"}
        shown_as = {"message_id": message["message_id"], "date": 1_700_000_000, "chat": chat,
                    "text": message["text"]}  # fmt: skip
        query = {"id": "t" + uuid.uuid4().hex[:12], "from": user, "chat_instance": "c",
                 "data": token, "message": shown_as}  # fmt: skip
        answer = httpx.post(
            self.owner.base_url + "/emulator/owner/raw",
            json={"update": {"callback_query": query}},
            timeout=WAIT_S,
            trust_env=False,
        )
        assert answer.status_code == 200, answer.text

    def lines(self, pattern: str) -> list[str]:
        """The Chief lines (chief.db's messages) matching `pattern`."""
        with closing(sqlite3.connect(f"file:{self.stack.chief_db}?mode=ro", uri=True)) as conn:
            rows = conn.execute("SELECT content FROM messages ORDER BY id").fetchall()
        return [str(content) for (content,) in rows if re.search(pattern, str(content))]

    def wait_line(self, pattern: str) -> str:
        return self.owner.wait_for(
            lambda _: self.lines(pattern), WAIT_S, f"a Chief line {pattern!r}"
        )[0]

    def marked_rings(self, key: str) -> int:
        """The rings of the report `key` chief.db has marked sent."""
        with closing(sqlite3.connect(f"file:{self.stack.chief_db}?mode=ro", uri=True)) as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM urgent_messages WHERE urgent_key = ?", (key,)
            ).fetchone()
        return int(count)

    def live_got_its(self, text: str) -> int:
        return sum(1 for m in self.rings(text) if GOT_IT in labels(m))

    def quiet_behind_marker(self, text: str) -> list[dict[str, Any]]:
        """File a marker report, wait for its second ring (one interval at least), acknowledge
        it; the rings of `text` then."""
        marker = f"marker {uuid.uuid4().hex[:8]}"
        self.post(marker, urgent=True)
        self.wait_rings(marker, 2)
        self.got_it(marker)
        return self.rings(text)

    def metric(self, name: str) -> float:
        answer = self.stack.door_request(
            "GET",
            "/metrics",
            headers={SERVICE_KEY_HEADER: SERVICE_KEY},
            timeout=WAIT_S,
        )
        for line in answer.text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not in the door's /metrics")


def labels(message: dict[str, Any]) -> list[str]:
    markup = message.get("reply_markup") or {}
    return [button["text"] for row in markup.get("inline_keyboard", []) for button in row]


def shown(message: dict[str, Any]) -> str:
    """A ring's own text (an older ring's edit appends a note after a blank line)."""
    return str(message["text"]).split("\n\n")[0]


def text_of(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:8]}"


@contextmanager
def urgent_stack(folder: Path, expire_s: float) -> Iterator[Urgent]:
    """A door whose reports ring every RERING_S and expire after `expire_s`, the owner's /quiet
    on, and the owner's phone beside it."""
    settings = {
        "CHIEF_TEST_URGENT_SHORT": "1",
        "CHIEF_URGENT_RERING_S": str(RERING_S),
        "CHIEF_URGENT_EXPIRE_S": str(expire_s),
    }
    stack = Stack(folder, door_env=settings)
    try:
        stack.start_door()
        stack.door.wait_event("door.phone_commands_registered", "the door's phone polling")
        phone = Urgent(stack)
        before = len(phone.owner.messages())
        phone.owner.text(OWNER_ID, OWNER_ID, "/quiet 2h")
        phone.owner.wait_for(lambda o: len(o.messages()) > before, WAIT_S, "/quiet answered")
        yield phone
        phone.owner.close()
    finally:
        stack.stop()
        stack.close()


@pytest.fixture(scope="module")
def urgent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Urgent]:
    with urgent_stack(tmp_path_factory.mktemp("urgent"), LONG_EXPIRE_S) as phone:
        yield phone


@pytest.fixture
def expiring(tmp_path: Path) -> Iterator[Urgent]:
    with urgent_stack(tmp_path, EXPIRE_S) as phone:
        yield phone


def test_an_urgent_report_rings_loud_through_quiet_again_and_stops_at_got_it(
    urgent: Urgent,
) -> None:
    ordinary = text_of("plants watered")
    urgent.post(ordinary)
    text = text_of("the freezer is warm")
    key = urgent.post(text, urgent=True)
    first, second, third = urgent.wait_rings(text, 3)[:3]
    assert shown(first) == f"URGENT: {text}"
    assert first["disable_notification"] is False  # through the owner's /quiet
    plain = urgent.owner.wait_for(
        lambda o: [m for m in o.messages() if ordinary in m["text"]], WAIT_S, "the plain row"
    )
    assert plain[0]["disable_notification"] is True  # an ordinary row obeys /quiet
    assert shown(second) == f"URGENT, again (ring 2, waiting 0 min): {text}"
    assert shown(third) == f"URGENT, again (ring 3, waiting 0 min): {text}"
    assert all(not m["disable_notification"] for m in (second, third))
    assert [key] == [row["key"] for row in urgent.stack.door_status()["urgent"]["ringing"]
                     if row["text"].endswith(text)]  # fmt: skip
    # One live "Got it" on the phone: the older rings lost their buttons (edited).
    urgent.owner.wait_for(lambda _: urgent.live_got_its(text) == 1, WAIT_S, "one live Got it")
    urgent.owner.text(OWNER_ID, OWNER_ID, "/status")
    urgent.owner.wait_for(
        lambda o: any("URGENT, ringing (ring" in m["text"] and text in m["text"]
                      for m in o.messages()),
        WAIT_S,
        "/status listing it",
    )  # fmt: skip
    assert GOT_IT in labels(urgent.rings(text)[-1])
    urgent.got_it(text)
    line = urgent.wait_line(
        rf"^acknowledged at \d\d:\d\d by the owner \(after \d+ rings\): {text}$"
    )
    # The toast answers the tap after the line is written: wait for it, do not race it.
    urgent.owner.wait_for(
        lambda o: [a for a in o.callback_answers() if a["text"].startswith("Acknowledged at")],
        WAIT_S,
        "the Acknowledged toast",
    )
    rung = len(urgent.rings(text))
    assert rung <= int(line.split("(after ")[1].split(" ")[0]) + 1  # one in flight at most
    assert len(urgent.quiet_behind_marker(text)) == rung  # it stopped
    assert len(urgent.lines(rf"acknowledged at .*: {text}$")) == 1
    assert urgent.lines(rf"^URGENT: {text}$")
    assert urgent.metric("coop_urgent_acknowledgements_total") >= 1
    assert urgent.metric("coop_urgent_rings_total") >= 3


def test_a_double_tap_on_got_it_acknowledges_once(urgent: Urgent) -> None:
    text = text_of("front door open")
    urgent.post(text, urgent=True)
    first = urgent.wait_rings(text, 1)[0]
    [token] = [b["callback_data"] for row in first["reply_markup"]["inline_keyboard"]
               for b in row if b["text"] == GOT_IT]  # fmt: skip
    answers_before = len(urgent.owner.callback_answers())
    # Two taps of the same button, both sent by the phone before any edit reached it.
    urgent.tap_as(OWNER_ID, first, token)
    urgent.tap_as(OWNER_ID, first, token)
    toasts = urgent.owner.wait_for(
        lambda o: (found := o.callback_answers()[answers_before:]) and len(found) >= 2 and found,
        WAIT_S,
        "both taps answered",
    )
    words = sorted(t["text"].split(" (")[0].split(" at ")[0] for t in toasts)
    assert words == ["Acknowledged", "Already acknowledged"], toasts
    urgent.wait_line(rf"acknowledged at .*: {text}$")
    urgent.quiet_behind_marker(text)
    assert len(urgent.lines(rf"acknowledged at .*: {text}$")) == 1


def test_a_reply_to_an_urgent_ring_acknowledges_it(urgent: Urgent) -> None:
    text = text_of("water leak")
    urgent.post(text, urgent=True)
    first = urgent.wait_rings(text, 1)[0]
    urgent.owner.text(OWNER_ID, OWNER_ID, "on my way", reply_to_message_id=first["message_id"])
    urgent.wait_line(rf"^acknowledged at .*: {text}$")
    rung = len(urgent.rings(text))
    assert len(urgent.quiet_behind_marker(text)) <= rung + 1  # one in flight at most


def test_an_urgent_request_has_got_it_beside_its_choices_and_its_settle_stops_it(
    urgent: Urgent,
) -> None:
    key = "q-" + uuid.uuid4().hex
    title = text_of("open the gate")
    ask = {"request_id": 41, "key": key, "title": title, "choices": ["approve", "decline"]}
    urgent.post(f"request #41: {title}", urgent=True, ask=ask)
    urgent.wait_rings(title, 2)
    # The newest ring carries the choices and Got it below them; the older ones none.
    urgent.owner.wait_for(
        lambda _: (
            [labels(m) for m in urgent.rings(title)][-2:] == [[], ["approve", "decline", GOT_IT]]
        ),
        WAIT_S,
        "the choices and Got it on the newest ring only",
    )
    urgent.owner.wait_for(lambda _: urgent.live_got_its(title) == 1, WAIT_S, "one live Got it")
    # The ledger closed it (the phone's answer, or any close): its settle row.
    settle_text = f'request #41 "{title}": approve'
    urgent.post(settle_text, settles={"request_id": 41, "key": key})
    urgent.wait_line(rf"^acknowledged at .*: request #41: {title}$")
    rung = len(urgent.rings(title))
    assert len(urgent.quiet_behind_marker(title)) <= rung + 1


def test_a_batch_rings_its_urgent_row_alone_and_loud_and_the_rest_as_before(
    urgent: Urgent,
) -> None:
    quiet, loud = text_of("batch plain"), text_of("batch urgent")
    answers = urgent.post_batch(
        [
            {"text": f"{quiet} 1", "kind": "notify"},  # no `urgent`: an ordinary report
            {"text": loud, "kind": "notify", "urgent": True},
            {"text": f"{quiet} 2", "kind": "notify"},
        ]
    )
    assert [answer["delivered"] for answer in answers] == [True, True, True]
    first = urgent.wait_rings(loud, 1)[0]
    assert shown(first) == f"URGENT: {loud}"  # alone: never in a digest
    assert first["disable_notification"] is False
    plain = urgent.owner.wait_for(
        lambda o: [m for m in o.messages() if quiet in m["text"]], WAIT_S, "the plain rows"
    )
    assert all(m["disable_notification"] for m in plain)
    assert all("URGENT" not in m["text"] and not labels(m) for m in plain)
    urgent.got_it(loud)
    urgent.wait_line(rf"^acknowledged at .*: {loud}$")
    assert urgent.lines(rf"^{quiet} 1$")  # its Chief line unmarked


def test_an_unacknowledged_urgent_report_expires_with_its_line(expiring: Urgent) -> None:
    urgent = expiring
    text = text_of("smoke alarm")
    key = urgent.post(text, urgent=True)
    line = urgent.owner.wait_for(
        lambda _: urgent.lines(rf"^went unacknowledged after \d+ rings in 0 min: {text}$"),
        EXPIRE_S + WAIT_S,
        "the expiry's line",
    )[0]
    rings = int(line.split("after ")[1].split(" ")[0])
    assert rings == len(urgent.rings(text))
    assert rings <= EXPIRE_S / RERING_S + 1
    expired = urgent.stack.door_status()["urgent"]["expired_unacknowledged"]
    assert key in [row["key"] for row in expired]
    assert urgent.live_got_its(text) <= 1
    assert len(urgent.quiet_behind_marker(text)) == rings
    assert urgent.metric("coop_urgent_expiries_total") >= 1
    # `coop status --check` names it, and says a person is needed (on a ledger a write made:
    # the door was fed directly, and a read makes none).
    made = coop("todo", "add", "a ledger for status", env=urgent.stack.env())
    assert made.returncode == 0, made.stderr
    checked = coop("status", "--check", env=urgent.stack.env())
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f"urgent report {key} went unacknowledged: URGENT: {text}" in checked.stdout


def test_a_door_sigkill_neither_loses_nor_doubles_a_repeat_nor_forgets_an_ack(
    urgent: Urgent,
) -> None:
    text = text_of("pump stopped")
    key = urgent.post(text, urgent=True)
    urgent.wait_rings(text, 2)
    # Between two repeats: the second marked sent in chief.db (a kill between a send and its
    # mark is the sender's in-doubt case instead: rung once more, marked "possible repeat").
    urgent.owner.wait_for(lambda _: urgent.marked_rings(key) >= 2, WAIT_S, "ring 2 marked")
    urgent.stack.door.kill()
    urgent.stack.door.start()
    urgent.stack.door.wait_event("door.phone_commands_registered", "the door's phone again")
    urgent.wait_rings(text, 3)  # the next repeat, rung by the new door
    urgent.got_it(text)
    urgent.wait_line(rf"^acknowledged at .*: {text}$")
    rings = urgent.rings(text)
    numbers = [
        int(m["text"].split("(ring ")[1].split(",")[0])
        for m in rings
        if m["text"].startswith("URGENT, again")  # not a marked in-doubt repeat
    ]
    # Each repeat once, none lost: 2, 3, ... in order, however long the restart took.
    assert numbers == list(range(2, len(numbers) + 2)), [m["text"] for m in rings]
    assert len(numbers) >= 2
    assert not any(m["text"].startswith(REPEAT_MARKER) for m in rings)  # nothing in doubt
    # The acknowledgement is durable: a kill right after it rings nothing more at the restart.
    urgent.stack.door.kill()
    urgent.stack.door.start()
    urgent.stack.door.wait_event("door.phone_commands_registered", "the door's phone again")
    assert len(urgent.quiet_behind_marker(text)) == len(rings)
