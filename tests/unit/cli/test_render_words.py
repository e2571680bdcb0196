"""The family behind issue 27's "Python's insides leak into output meant for people": whatever a
row, an event or a status holds, `engine.cli.render` writes it as plain words. Any text comes
out as itself (never a repr's quotes, never `\\uXXXX` for a printable character), any nothing
as `—`, any flag as yes/no, and a text of several lines as indented lines, never a literal
`\\n` nor a line that starts where a field's label would.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from engine.cli import render

#: Printable text, newlines allowed (what a person typed, or a phone reply).
TEXT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), whitelist_characters="\n"),
    min_size=1,
    max_size=40,
)
VALUE = st.none() | st.booleans() | st.integers() | TEXT | st.lists(TEXT, max_size=3)
STAMP = "2026-12-03T10:28:26.962Z"
STAMP_S = 1796293706.962


def row(title: str, body: str | None, summary: str | None) -> dict[str, object]:
    return {
        "kind": "todo",
        "id": 3,
        "title": title.replace("\n", " "),
        "status": "done",
        "body": body,
        "created_by": "builder",
        "created_at": STAMP,
        "closed_by": "builder",
        "closed_at": STAMP,
        "result_summary": summary,
        "ask_key": "q-" + "0" * 32,
    }


@given(title=TEXT, body=st.none() | TEXT, summary=st.none() | TEXT)
def test_a_row_shows_each_text_as_itself_line_by_line(
    title: str, body: str | None, summary: str | None
) -> None:
    lines = render.row_lines(row(title, body, summary))
    for text in (body, summary):
        if text is None:
            continue
        for part in text.split("\n"):
            assert any(line.endswith(part) for line in lines)
    assert all("\n" not in line for line in lines)
    assert not any("ask_key" in line or "q-000" in line for line in lines)
    # A continuation line is indented past every label: it can never pose as a field.
    labels = [line for line in lines[1:] if not line.startswith("   ")]
    assert all(line.startswith("  ") and ":" in line for line in labels)
    assert ("  body:     —" in lines) == (body is None)


@given(payload=st.dictionaries(st.sampled_from(["title", "choices", "fast_path", "via"]), VALUE))
def test_an_event_payload_is_words_without_the_machines_flags(payload: dict[str, object]) -> None:
    words = render.payload_words(json.dumps(payload, sort_keys=True))
    assert "fast_path" not in words
    for name, value in payload.items():
        if name == "fast_path":
            continue
        assert f"{name}: {render.word(value)}" in words
    for insides in ("None", "True", "False", '"', "\\u"):
        if not any(insides in str(value) for value in payload.values()):
            assert insides not in words


@given(value=VALUE)
def test_a_value_is_a_word(value: object) -> None:
    said = render.word(value)
    if value is None or value == "" or value == []:
        assert said == "—"
    elif isinstance(value, bool):
        assert said == ("yes" if value else "no")
    elif isinstance(value, str):
        assert said == value


CELL = TEXT.map(lambda text: text.replace("\n", " ").strip()).filter(bool)


@given(cells=st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=1, max_size=5))
def test_columns_line_up(cells: list[list[str]]) -> None:
    widths = [max(len(row[0]) for row in cells), max(len(row[1]) for row in cells)]
    for row, line in zip(cells, render.columns(cells), strict=True):
        assert line == f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}"


def test_times_read_with_their_age() -> None:
    assert render.when(STAMP, now_s=STAMP_S + 185) == "2026-12-03 10:28 UTC (3 min ago)"
    assert render.when(None) == "—"
    assert render.ago(STAMP, now_s=STAMP_S + 5 * 3600) == "5 h ago"
    assert render.ago(STAMP, now_s=STAMP_S + 86400) == "1 day ago"
    assert render.ago("not a time") == "not a time"
