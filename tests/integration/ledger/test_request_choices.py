"""`coop request add TITLE --to OWNER --choices a,b` on a real ledger file: the labels the owner
may tap on the phone, refused in one line naming the bad one (exit 2, nothing written), shown
by `request show` and `list --json`, and the request reported when filed."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from engine import lifecycle
from engine.cli import main
from engine.errors import UsageError

Coop = Callable[..., tuple[int, str, str]]


@pytest.fixture
def coop(db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Coop:
    """Run `coop ARGS` in this process on `db`; answer (status, stdout, stderr)."""
    monkeypatch.setenv("COOP_DB", db)
    monkeypatch.setenv("COOP_KICK", "off")
    monkeypatch.setenv("COOP_ACTOR", "agent")
    monkeypatch.setenv("COOP_OWNER", "owner")
    monkeypatch.delenv("COOP_OWNER_FILE", raising=False)
    monkeypatch.delenv("COOP_TEST_FAULTS", raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        status = main(list(args))
        printed = capsys.readouterr()
        return status, printed.out, printed.err

    return run


def _count(db: str, table: str) -> int:
    """Rows in `table`; 0 where a refused call never created the ledger at all."""
    if not Path(db).exists():
        return 0
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


REFUSALS = [
    ("a,b,c,d,e", "--choices takes 1 to 4 labels separated by commas (approve,decline), not 5"),
    ("", "--choices takes 1 to 4 labels separated by commas (approve,decline), not 0"),
    ("approve,,decline", "choice 2 is empty: separate labels with single commas"),
    ("approve,", "choice 2 is empty: separate labels with single commas"),
    ("x" * 25, f"choice '{'x' * 25}' is 25 characters; keep each to 24"),
    ("ok,be\x07ll", "choice 'be\\x07ll' has a control character: use plain text"),
    ("ok,tab\there", "choice 'tab\\there' has a control character: use plain text"),
    ("ok,\x85next", "choice '\\x85next' has a control character: use plain text"),
    ("Approve,approve", "choice 'approve' repeats 'Approve': choices differ by more than case"),
]


@pytest.mark.parametrize(("raw", "words"), REFUSALS, ids=[r[1][:40] for r in REFUSALS])
def test_bad_choices_are_refused_in_one_line_naming_the_label(
    coop: Coop, db: str, raw: str, words: str
) -> None:
    status, out, err = coop("request", "add", "order?", "--to", "owner", "--choices", raw)
    assert (status, out) == (2, "")
    assert err.strip().splitlines() == [f"coop: {words}"]
    assert _count(db, "requests") == 0


@pytest.mark.parametrize(("to", "whom"), [(("--to", "reviewer"), "to reviewer"), ((), "to anyone")])
def test_choices_are_only_for_a_request_to_the_owner(
    coop: Coop, db: str, to: tuple[str, ...], whom: str
) -> None:
    status, _, err = coop("request", "add", "order?", *to, "--choices", "approve,decline")
    assert status == 2
    assert err.strip() == (
        f"coop: --choices is only for a request to the owner (owner); this one is {whom}:"
        " add --to owner, or drop --choices"
    )
    assert _count(db, "requests") == 0


def test_the_checks_are_pure_and_keep_each_label_as_written() -> None:
    assert lifecycle.require_choices(" Approve , decline ", "owner", "owner") == [
        "Approve",
        "decline",
    ]
    assert lifecycle.require_choices(None, None, "owner") is None
    assert lifecycle.require_choices("x" * 24, "owner", "owner") == ["x" * 24]
    assert lifecycle.require_choices("ja,nein,vielleicht,später", "owner", "owner")
    with pytest.raises(UsageError):
        lifecycle.require_choices("ok,\x7f", "owner", "owner")


def test_show_and_list_give_the_choices(coop: Coop, db: str) -> None:
    status, out, _ = coop(
        "request", "add", "order the bigger bag?", "--to", "owner", "--choices", "approve,decline"
    )
    assert status == 0
    assert out.strip() == "request #1 added; notification #1 queued"
    coop("request", "add", "review it", "--to", "reviewer")

    _, out, _ = coop("request", "show", "1")
    assert "  choices:  approve / decline" in out.splitlines()
    _, out, _ = coop("request", "show", "1", "--json")
    assert json.loads(out)["request"]["choices"] == ["approve", "decline"]
    assert json.loads(out)["events"][0]["payload"] == json.dumps(
        {
            "addressed_to": "owner",
            "choices": ["approve", "decline"],
            "title": "order the bigger bag?",
        },
        sort_keys=True,
    )
    _, out, _ = coop("list", "--json")
    assert [item["choices"] for item in json.loads(out)] == [["approve", "decline"], None]
    # Only the request to the owner is reported when filed.
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT kind, text, extra FROM coop_outbox").fetchall()
        (key,) = conn.execute("SELECT ask_key FROM requests WHERE id = 1").fetchone()
    assert re.fullmatch(r"q-[0-9a-f]{32}", key)
    assert [(kind, text, json.loads(extra)) for kind, text, extra in rows] == [
        (
            "request_added",
            "request #1 from agent: order the bigger bag? (approve / decline)",
            {
                "ask": {
                    "request_id": 1,
                    "key": key,
                    "title": "order the bigger bag?",
                    "choices": ["approve", "decline"],
                }
            },
        )
    ]


def test_a_close_of_a_request_to_the_owner_settles_its_ask(coop: Coop, db: str) -> None:
    coop("request", "add", "any news?", "--to", "owner")
    coop("request", "add", "review it", "--to", "reviewer")
    coop("--as", "owner", "request", "close", "1", "--summary", "none yet")
    coop("--as", "reviewer", "request", "close", "2")
    coop("todo", "add", "t")
    coop("todo", "done", "1")
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT kind, extra FROM coop_outbox ORDER BY id").fetchall()
        keys = conn.execute("SELECT ask_key FROM requests ORDER BY id").fetchall()
    (key,), (never_asked,) = keys
    assert never_asked is None  # a request to someone else is never asked on the phone
    ask = {"request_id": 1, "key": key, "title": "any news?", "choices": []}
    assert [(kind, extra and json.loads(extra)) for kind, extra in rows] == [
        ("request_added", {"ask": ask}),
        ("request_closed", {"settles": {"request_id": 1, "key": key}}),
        ("request_closed", None),
        ("todo_done", None),
    ]
