"""Fitting a line into Telegram's limit, counted in UTF-16 units as the Bot API counts."""

from __future__ import annotations

from chief.telegram.sender import MAX_TELEGRAM_UTF16_UNITS, fit_for_telegram


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_a_door_sized_plain_text_is_sent_whole():
    text = "x" * 4000
    assert fit_for_telegram(text) == text


def test_a_text_of_exactly_the_limit_is_sent_whole():
    text = "🌱" * (MAX_TELEGRAM_UTF16_UNITS // 2)
    assert fit_for_telegram(text) == text


def test_wide_characters_past_the_limit_are_cut_with_a_marker_never_split():
    cut = fit_for_telegram("🌱" * 4000)
    assert units(cut) <= MAX_TELEGRAM_UTF16_UNITS
    assert cut.endswith("[cut for Telegram; the whole line is in the Master Chief]")
    body = cut.split(" … [cut", 1)[0]
    assert body == "🌱" * len(body)  # whole characters only, no lone surrogate
