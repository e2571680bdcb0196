"""`coop request add ... --deadline D --default C --remind R --urgent` and `coop notify --urgent`
on a real ledger file (issue 28): every bad value or combination refused in one line, exit 2,
nothing written; a good one stored on the request, shown by `request show` (and `--json`), and
carried by the `request_added` row exactly as the contract between the parts says. The parser
of a deadline answers any text with a value or one refusal (a Hypothesis property)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import lifecycle
from engine.cli import main
from engine.errors import UsageError

Coop = Callable[..., tuple[int, str, str]]
ASK = ("request", "add", "pay the plumber", "--to", "owner")


@pytest.fixture
def coop(db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Coop:
    """Run `coop ARGS` in this process on `db`; answer (status, stdout, stderr)."""
    monkeypatch.setenv("COOP_DB", db)
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "agent")
    monkeypatch.setenv("COOP_OWNER", "owner")
    monkeypatch.delenv("COOP_REMIND_MAX", raising=False)
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        status = main(list(args))
        printed = capsys.readouterr()
        return status, printed.out, printed.err

    return run


def _count(db: str, table: str) -> int:
    if not Path(db).exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


REFUSALS = [
    (("--default", "a"), "--default needs --deadline: the default is what the deadline decides"),
    (("--deadline", "2s", "--default", "a"), "--default names one of --choices"),
    (
        ("--choices", "a,b", "--deadline", "2s", "--default", "c"),
        "--default 'c' is not one of the choices (a / b)",
    ),
    (("--deadline", "soon"), "--deadline 'soon' is not a duration such as 90s, 30m, 2h or 1d"),
    (("--deadline", "0s"), "--deadline '0s' is out of range: give 1 s to 366 days"),
    (("--deadline", "367d"), "--deadline '367d' is out of range"),
    (("--deadline", "5 m"), "--deadline '5 m' is not a duration"),
    (("--deadline", "1.5h"), "--deadline '1.5h' is not a duration"),
    (("--deadline", "24:00"), "--deadline '24:00' is not a time of day: give HH:MM"),
    (("--deadline", "18:60"), "--deadline '18:60' is not a time of day"),
    (("--deadline", "١٢s"), "is not a duration"),  # digits of another script
    (("--remind", "0s"), "--remind '0s' is out of range: give 1 s to 366 days"),
    (("--remind", "18:00"), "--remind '18:00' is not a duration such as 90s, 30m, 2h or 1d"),
]


@pytest.mark.parametrize(("flags", "words"), REFUSALS)
def test_a_bad_value_or_combination_is_refused_in_one_line_and_nothing_is_written(
    coop: Coop, db: str, flags: tuple[str, ...], words: str
) -> None:
    status, out, err = coop(*ASK, *flags)
    assert (status, out) == (2, "")
    assert err.startswith("coop: ")
    assert words in err
    assert err.count("\n") == 1
    assert _count(db, "requests") == _count(db, "coop_outbox") == 0


@pytest.mark.parametrize("flags", [("--remind", "30m"), ("--urgent",)])
def test_reminders_and_urgency_are_only_for_a_request_to_the_owner(
    coop: Coop, db: str, flags: tuple[str, ...]
) -> None:
    status, _, err = coop("request", "add", "for the builder", "--to", "builder", *flags)
    assert status == 2
    assert err == (
        f"coop: {flags[0]} is only for a request to the owner (owner); this one is to builder:"
        f" add --to owner, or drop {flags[0]}\n"
    )
    assert _count(db, "requests") == 0


def test_a_wrong_remind_max_is_refused_naming_the_setting(
    coop: Coop, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_REMIND_MAX", "0")
    status, _, err = coop(*ASK, "--remind", "30m")
    assert status == 2
    assert err == "coop: COOP_REMIND_MAX must be a whole number from 1 to 100, not '0'\n"
    assert _count(db, "requests") == 0


def _extra(db: str, kind: str) -> dict[str, object]:
    with closing(sqlite3.connect(db)) as conn:
        (extra,) = conn.execute(
            "SELECT extra FROM coop_outbox WHERE kind = ? ORDER BY id DESC LIMIT 1", (kind,)
        ).fetchone()
    return dict(json.loads(extra))


def test_the_options_are_stored_shown_and_carried_by_the_ask(
    coop: Coop, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOP_REMIND_MAX", "5")
    before = time.time()
    flags = ("--choices", "approve,decline", "--deadline", "2h", "--default", "DECLINE")
    status, _, err = coop(*ASK, *flags, "--remind", "30m", "--urgent")
    # The first write on a fresh ledger says it started it; nothing else.
    assert (status, err) == (0, f"coop: started a new ledger at {db} (COOP_DB={db})\n")

    shown = json.loads(coop("request", "show", "1", "--json")[1])["request"]
    assert before + 7200 <= shown["deadline_at"] <= time.time() + 7200
    assert shown["default_choice"] == "decline"  # the request's own label
    assert (shown["remind_every_s"], shown["remind_max"], shown["urgent"]) == (1800, 5, True)
    extra = _extra(db, "request_added")
    assert extra["urgent"] is True
    ask = extra["ask"]
    assert isinstance(ask, dict)
    assert ask["deadline_at"] == shown["deadline_at"]
    assert ask["default"] == "decline"
    assert ask["remind"] == {"every_s": 1800, "max": 5}

    human = coop("request", "show", "1")[1]
    clock = datetime.fromtimestamp(shown["deadline_at"]).strftime("%H:%M")
    assert f"  deadline: {clock} " in human
    assert "(if no answer: decline)" in human
    assert "  remind:   every 30 min, at most 5 times" in human
    assert "  urgent:   yes" in human


def test_an_ask_without_options_carries_none_of_them(coop: Coop, db: str) -> None:
    assert coop(*ASK, "--choices", "a,b")[0] == 0
    extra = _extra(db, "request_added")
    assert set(extra) == {"ask"}
    ask = extra["ask"]
    assert isinstance(ask, dict)
    assert set(ask) == {"request_id", "key", "title", "choices"}
    shown = json.loads(coop("request", "show", "1", "--json")[1])["request"]
    assert shown["deadline_at"] is None
    assert shown["urgent"] is False
    assert "deadline" not in coop("request", "show", "1")[1]


def test_a_deadline_alone_abandons_and_needs_no_owner(coop: Coop, db: str) -> None:
    assert coop("request", "add", "anyone?", "--deadline", "90s")[0] == 0
    shown = json.loads(coop("request", "show", "1", "--json")[1])["request"]
    assert shown["default_choice"] is None
    assert "(if no answer: abandoned)" in coop("request", "show", "1")[1]


def test_notify_urgent_carries_urgent_true_and_a_plain_notify_does_not(coop: Coop, db: str) -> None:
    assert coop("notify", "--urgent", "the freezer is warm")[0] == 0
    assert _extra(db, "note") == {"urgent": True}
    assert coop("notify", "the plants are watered")[0] == 0
    with closing(sqlite3.connect(db)) as conn:
        (extra,) = conn.execute("SELECT extra FROM coop_outbox ORDER BY id DESC").fetchone()
    assert extra is None


# ---- the parser, pure --------------------------------------------------------------------

NOW = datetime(2026, 12, 3, 14, 30).timestamp()  # a local time


@pytest.mark.parametrize(
    ("text", "after_s"), [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86400), (" 5s ", 5)]
)
def test_a_duration_is_counted_from_now(text: str, after_s: int) -> None:
    assert lifecycle.parse_deadline(text, NOW) == NOW + after_s


def test_a_time_of_day_is_today_while_still_ahead_else_tomorrow() -> None:
    assert lifecycle.parse_deadline("18:00", NOW) == datetime(2026, 12, 3, 18, 0).timestamp()
    assert lifecycle.parse_deadline("9:05", NOW) == datetime(2026, 12, 4, 9, 5).timestamp()
    assert lifecycle.parse_deadline("14:30", NOW) == datetime(2026, 12, 4, 14, 30).timestamp()
    assert lifecycle.deadline_when(datetime(2026, 12, 4, 9, 5).timestamp(), NOW) == "09:05 tomorrow"


def _refusal(parse: Callable[[], object]) -> tuple[object, str | None]:
    """What a parse answers: its value and no refusal, or no value and the refusal's words."""
    try:
        return parse(), None
    except UsageError as refused:
        return None, refused.message


@given(st.text(max_size=40), st.floats(min_value=0, max_value=4e9))
def test_any_text_is_a_deadline_or_one_refusal_never_a_traceback(text: str, now: float) -> None:
    at, refused = _refusal(lambda: lifecycle.parse_deadline(text, now))
    if refused is not None:
        assert refused.startswith(f"--deadline {text!r} ")
        assert "\n" not in refused.removeprefix(f"--deadline {text!r} ")
    else:
        assert isinstance(at, float)
        assert now < at <= now + lifecycle.MAX_WAIT_S


@given(st.text(max_size=40))
def test_any_text_is_a_reminder_interval_or_one_refusal(text: str) -> None:
    every_s, refused = _refusal(lambda: lifecycle.parse_duration(text, "--remind"))
    if refused is not None:
        assert refused.startswith(f"--remind {text!r} ")
    else:
        assert isinstance(every_s, int)
        assert 1 <= every_s <= lifecycle.MAX_WAIT_S


@pytest.mark.parametrize(
    "args",
    [
        ("request", "close", "1", "--summary", "decline", "--as", "deadline"),
        ("request", "release", "1", "--as", "Deadline"),
        ("request", "take", "1", "--as", " deadline "),
        ("request", "add", "another", "--to", "deadline"),
        ("todo", "add", "water", "--as", "DEADLINE"),
    ],
)
def test_no_caller_may_act_as_the_deadline(coop: Coop, db: str, args: tuple[str, ...]) -> None:
    """`deadline` is the ledger's own name for a decision by a request's deadline: a person
    or agent naming itself so would make its close read as the deadline's (`request wait`
    says the deadline decided it). Refused in one line, exit 2, nothing written."""
    assert coop(*ASK, "--choices", "approve,decline")[0] == 0
    events = _count(db, "coop_events")
    status, out, err = coop(*args)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert "'deadline' is the ledger's own name" in err
    assert _count(db, "coop_events") == events
