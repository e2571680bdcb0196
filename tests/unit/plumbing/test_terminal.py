"""plumbing.terminal, the one rule for what reaches a terminal (every line `coop` and `chief`
print):

- `shown` leaves nothing a terminal acts on (C0, DEL, C1, the bidi controls, the line
  separators, a lone surrogate), escapes each such character and nothing else, and keeps every
  other character as it is;
- `shown_json` keeps a `json.dumps` document exact: `json.loads` reads the same value back.

The services' console log lines show a logged value escaped too (tests/unit/plumbing/test_logs.py).
"""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from plumbing.terminal import shown, shown_json

#: Written here once more, on purpose: the test's own reading of the rule, not the module's.
ACTING = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)
ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[tnr])")
#: Any text at all, lone surrogates included (what argv's `surrogateescape` or JSON can spell).
ANY_TEXT = st.text(st.characters(codec=None, categories=None))


@given(text=ANY_TEXT)
def test_shown_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    printed = shown(text)
    assert not ACTING.search(printed)
    printed.encode("utf-8")  # a UTF-8 terminal can be given all of it


@given(text=ANY_TEXT)
def test_shown_escapes_each_acting_character_and_keeps_the_rest(text: str) -> None:
    """Reading the escapes back gives the text again, when the text spells no escape itself."""
    printed = shown(text)
    if not ESCAPE.search(text):
        named = {"t": "\t", "n": "\n", "r": "\r"}
        back = ESCAPE.sub(
            lambda found: named.get(found.group(1)) or chr(int(found.group(1)[1:], 16)), printed
        )
        assert back == text
    if not ACTING.search(text):
        assert printed == text


@given(value=st.recursive(ANY_TEXT | st.integers() | st.none(), lambda inner: st.lists(inner)))
def test_shown_json_keeps_the_document_exact(value: object) -> None:
    for ascii_only in (True, False):
        document = json.dumps({"v": value}, ensure_ascii=ascii_only, indent=2)
        printed = shown_json(document)
        assert not ACTING.search(printed.replace("\n", ""))
        assert json.loads(printed) == json.loads(document)


def test_the_sequences_seen_in_the_wild_are_shown_escaped() -> None:
    assert shown("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07"
    assert shown("\x1b[2J\x9b2J") == "\\x1b[2J\\x9b2J"
    assert shown("a\x00b\rc\nd\te\x7f") == "a\\x00b\\rc\\nd\\te\\x7f"
    assert shown("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert shown("café ✅ 日本 \U0001f600") == "café ✅ 日本 \U0001f600"
