"""The pure part of the phone's commands (chief/phone/commands_text.py): what the owner may type,
and every word the door answers, with the clock passed in."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chief.phone.commands_text import (
    COMMANDS,
    HELP,
    HELP_FIRST_LINE,
    MAX_LISTED,
    NOT_RUNNING,
    QUIET_MAX_S,
    QUIET_MIN_S,
    QUIET_REFUSAL,
    Command,
    QuietOverride,
    item_list,
    parse_command,
    parse_quiet,
    quiet_off,
    quiet_state,
    span,
    status_text,
)
from chief.phone.pacing import QuietHours

NOW = 1_800_000_000.0


def _summary(todos: int = 2, requests: int = 1) -> dict[str, object]:
    return {
        "owner": "owner",
        "todos": {
            "open": todos,
            "items": [
                {"id": n, "title": f"todo {n}", "status": "open", "taken_by": None}
                for n in range(1, todos + 1)
            ],
        },
        "requests": {
            "open": requests,
            "items": [
                {
                    "id": 100 + n,
                    "title": f"order the bag {n}?",
                    "status": "open",
                    "taken_by": None,
                    "addressed_to": "owner",
                    "choices": ["approve", "decline"],
                }
                for n in range(1, requests + 1)
            ],
        },
        "oldest": {"kind": "todo", "id": 1, "title": "todo 1", "age_s": 7260.0},
        "outbox": {"pending": 3, "oldest_pending_age_s": 42.0, "last_error": "door down"},
    }


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/status", Command("status", "")),
        ("/QUIET 2h", Command("quiet", "2h")),
        ("/quiet@coop_bot  off ", Command("quiet", "off")),
        ("  /help", Command("help", "")),
        ("/start ABC123", Command("start", "ABC123")),
        ("/quiet\t2h", Command("quiet", "2h")),
        ("/quiet\n2h", Command("quiet", "2h")),
        ("/quiet\u00a02h", Command("quiet", "2h")),
    ],
)
def test_a_command_line_is_its_name_and_the_rest(text: str, command: Command) -> None:
    assert parse_command(text) == command


@pytest.mark.parametrize("text", ["status", "", "/", "/sta-tus", "/" + "x" * 33, "hello /status"])
def test_anything_else_is_not_a_command(text: str) -> None:
    assert parse_command(text) is None


@pytest.mark.parametrize(
    ("argument", "seconds"),
    [("1m", 60), ("30m", 1800), ("2h", 7200), ("90 min", 5400), ("24h", 86400), ("1440m", 86400)],
)
def test_quiet_takes_minutes_and_hours_within_a_day(argument: str, seconds: int) -> None:
    assert parse_quiet(argument).for_s == seconds


@pytest.mark.parametrize(
    "argument", ["0m", "25h", "1441m", "2", "2d", "-1h", "1.5h", "soon", "2h x"]
)
def test_quiet_refuses_anything_else_in_one_line(argument: str) -> None:
    ask = parse_quiet(argument)
    assert ask.refusal == QUIET_REFUSAL
    assert ask.for_s is None
    assert "\n" not in QUIET_REFUSAL


def test_quiet_alone_shows_and_off_ends() -> None:
    assert parse_quiet("").show
    assert parse_quiet(" OFF ").off


@given(st.text(max_size=20))
def test_quiet_never_fails_and_never_leaves_its_range(argument: str) -> None:
    ask = parse_quiet(argument)
    assert ask.for_s is None or QUIET_MIN_S <= ask.for_s <= QUIET_MAX_S
    assert [ask.show, ask.off, ask.for_s is not None, ask.refusal is not None].count(True) == 1


def test_the_override_holds_until_its_time() -> None:
    quiet = QuietOverride(NOW + 60)
    assert quiet.holds(NOW)
    assert not quiet.holds(NOW + 60)
    assert not QuietOverride().holds(NOW)


def test_the_quiet_state_says_how_long_is_left() -> None:
    assert "1h 59m" in quiet_state(NOW + 7140, NOW)
    assert quiet_state(None, NOW).startswith("Quiet is off")
    assert quiet_state(NOW - 1, NOW).startswith("Quiet is off")


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (59.6, "1m"), (600, "10m"), (7260, "2h 1m"), (3 * 86400, "3d")]
)
def test_a_span_reads_as_a_person_says_it(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_status_shows_the_ledger_the_outbox_the_telegram_queue_and_quiet() -> None:
    queue = {"depth": 2, "oldest_age_s": 90.0, "last_error": None, "refusal": None}
    text = status_text(_summary(), queue, quiet_until=NOW + 3600, now=NOW)
    assert text.splitlines() == [
        "Open: 2 todos, 1 request.",
        "Oldest: todo #1 todo 1 (2h 1m old)",
        "Notifications: 3 waiting to be sent, oldest 42s; last error: door down.",
        "Telegram queue: 2 waiting, oldest 1m.",
        "Quiet: on for 1h more.",
    ]


def test_status_without_the_ledger_says_so_and_still_shows_the_queue() -> None:
    refusal = {"kind": "bot_blocked", "answer": "403 Forbidden: bot was blocked by the user"}
    queue = {"depth": 1, "oldest_age_s": 5.0, "refusal": refusal}
    text = status_text(None, queue, quiet_until=None, now=NOW)
    assert text.splitlines() == [
        NOT_RUNNING,
        "Telegram queue: 1 waiting, oldest 5s; Telegram refuses: "
        "403 Forbidden: bot was blocked by the user.",
    ]
    assert "coop serve" in NOT_RUNNING


def test_an_empty_ledger_and_queue_read_plainly() -> None:
    summary = _summary(0, 0) | {"oldest": None, "outbox": {"pending": 0}}
    assert status_text(summary, {"depth": 0}, quiet_until=None, now=NOW).splitlines() == [
        "Open: 0 todos, 0 requests.",
        "Notifications: none waiting.",
        "Telegram queue: empty.",
    ]


def test_a_list_is_bounded_and_says_how_many_more() -> None:
    summary = _summary(todos=20)
    text = item_list("todo", summary["todos"])  # type: ignore[arg-type]
    lines = text.splitlines()
    assert lines[0] == "20 open todos:"
    assert len(lines) == 1 + MAX_LISTED + 1
    assert lines[-1] == f"... and {20 - MAX_LISTED} more"


def test_a_request_lists_its_choices_unless_it_was_just_rung_again() -> None:
    summary = _summary(requests=2)
    text = item_list("request", summary["requests"])  # type: ignore[arg-type]
    assert "request #101 order the bag 1? [approve / decline]" in text
    again = item_list("request", summary["requests"], skip=[101])  # type: ignore[arg-type]
    assert "request #101" not in again
    assert "#101: asked again, with its buttons" in again
    assert "#102" in again


def test_no_open_items_is_one_line() -> None:
    assert item_list("todo", {"open": 0, "items": []}) == "No open todos."


def test_long_titles_are_cut_so_every_answer_fits_one_message() -> None:
    summary = _summary(todos=20)
    for item in summary["todos"]["items"]:  # type: ignore[index]
        item["title"] = "word " * 2000
    text = item_list("todo", summary["todos"])  # type: ignore[arg-type]
    assert len(text) < 4096 // 2
    assert all(len(line) < 120 for line in text.splitlines())


def test_the_commands_are_what_setmycommands_accepts() -> None:
    assert 1 <= len(COMMANDS) <= 100
    for name, description in COMMANDS:
        assert re.fullmatch(r"[a-z0-9_]{1,32}", name)
        assert 1 <= len(description) <= 256
    assert HELP.splitlines()[0] == HELP_FIRST_LINE
    for name, _ in COMMANDS:
        assert f"/{name}" in HELP


@given(
    start=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
    end=st.times().map(lambda t: t.replace(second=0, microsecond=0)),
    now=st.floats(min_value=0, max_value=4_000_000_000),
    override=st.sampled_from([None, -60.0, 600.0]),
)
def test_every_quiet_answer_names_the_quiet_hours_and_whether_they_hold(
    start: time, end: time, now: float, override: float | None
) -> None:
    """/quiet alone, /quiet off and /status name TELEGRAM_QUIET_HOURS and say "in force now"
    exactly when the window holds at `now`, whatever the window and the /quiet override."""
    if start == end:
        return
    hours = QuietHours(start, end, UTC)
    holds = hours.is_quiet(datetime.fromtimestamp(now, UTC))
    until = None if override is None else now + override
    answers = [
        quiet_state(until, now, hours),
        quiet_off(now, hours),
        status_text(None, {"depth": 0}, quiet_until=until, now=now, quiet_hours=hours),
    ]
    for answer in answers:
        assert hours.named() in answer
        said_holds = "in force now" in answer.replace("not in force now", "")
        assert said_holds is holds, answer
        assert ("not in force now" in answer) is not holds, answer
        assert "quiet hours aside" not in answer
