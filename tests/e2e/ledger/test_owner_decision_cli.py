"""Issue 34, item 1, as a person meets it at a terminal: real `coop` processes on one ledger.
The owner answered `approve`; an agent's `close --force --summary decline` is kept as a note
and says so; the owner's own correction says `amended` and what changed; a repeat says
`unchanged` in true words; `request show` puts the amendment and the note under the close, each
with its own actor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.ledger import made_ledger
from tests.support.procs import clean_env, coop

pytestmark = pytest.mark.timeout(120)

WHEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC \(\d+ (s|min) ago\)")


def said(env: dict[str, str], *args: str) -> str:
    done = coop(*args, env=env, inherit=False)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return done.stdout.strip()


def test_the_owners_answer_stays_and_every_later_word_says_what_it_did(tmp_path: Path) -> None:
    env = clean_env(tmp_path, COOP_KICK="off", COOP_OWNER="owner")
    made_ledger(tmp_path)  # every word below is on stdout; a first write also says it made one
    said(env, "--as", "agent", "request", "add", "order the bag?", "--to", "owner",
         "--choices", "approve,decline")  # fmt: skip
    assert said(env, "--as", "owner", "request", "close", "1", "--summary", "approve") == (
        "request #1 closed; notification #2 queued"
    )
    forced = said(env, "--as", "agent", "request", "close", "1", "--summary", "decline", "--force")
    assert forced == (
        "request #1 noted: the owner's decision stays the record (summary \"approve\"); agent's"
        ' summary "decline" is kept as a note beside it; notification #3 queued'
    )
    amended = said(env, "--as", "owner", "request", "close", "1", "--summary", "approve, twice")
    assert amended == (
        'request #1 amended: summary "approve" → "approve, twice"; the first close stays the'
        " record; notification #4 queued"
    )
    again = said(env, "--as", "owner", "request", "close", "1", "--summary", "approve, twice")
    assert again == (
        "request #1 unchanged: already closed by owner, and nothing given differs from it"
    )
    # An id as it is printed (issue 34, item 10): `#1` is request 1, the same as `1`.
    by_mark = said(env, "request", "show", "#1")
    assert WHEN.sub("<when>", by_mark) == WHEN.sub("<when>", said(env, "request", "show", "1"))
    shown = [WHEN.sub("<when>", line) for line in said(env, "request", "show", "1").splitlines()]
    closed = next(i for i, line in enumerate(shown) if line.startswith("  closed:"))
    assert [re.sub(" {2,}", " ", line) for line in shown[closed : closed + 4]] == [
        " closed: <when> by owner",
        " summary: approve, twice",
        ' amended: <when> by owner: summary "approve" → "approve, twice"',
        " note: <when> by agent: decline",
    ]
