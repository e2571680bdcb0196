"""The fallback channel's settings (chief.fallback.settings): each wrong one is one line naming
it, at start, and no line ever shows what a URL may hide (a password, a token)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chief.errors import DoorError
from chief.fallback import settings as fallback_settings
from chief.fallback_rules import DEFAULT_AFTER_S, DEFAULT_MAX_PER_HOUR

GOOD = "mailto://coop@localhost?smtp=127.0.0.1&port=2525&mode=insecure&to=owner@example.org"


def refusal(env: dict[str, str], *, test_short: bool = False) -> str:
    with pytest.raises(DoorError) as caught:
        fallback_settings.from_env(env, test_short=test_short)
    line = caught.value.message
    assert "\n" not in line, line
    return line


def said(url: str) -> str | None:
    """The refusal of CHIEF_FALLBACK_URLS=`url`, None when it is taken."""
    try:
        fallback_settings.from_env({"CHIEF_FALLBACK_URLS": url}, test_short=False)
    except DoorError as exc:
        return exc.message
    return None


def url_file(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "fallback-urls"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_unset_is_no_fallback_and_the_defaults_hold() -> None:
    assert fallback_settings.from_env({}, test_short=False) is None
    found = fallback_settings.from_env({"CHIEF_FALLBACK_URLS": GOOD}, test_short=False)
    assert found is not None
    assert found.urls == (GOOD,)
    assert (found.after_s, found.max_per_hour) == (DEFAULT_AFTER_S, DEFAULT_MAX_PER_HOUR)
    assert GOOD not in repr(found)  # a URL may carry a password: never in a log line


def test_urls_split_on_whitespace_and_commas() -> None:
    raw = f"{GOOD}, ntfys://coop-topic\n  ntfys://other-topic"
    found = fallback_settings.from_env({"CHIEF_FALLBACK_URLS": raw}, test_short=False)
    assert found is not None
    assert found.urls == (GOOD, "ntfys://coop-topic", "ntfys://other-topic")


def test_a_malformed_url_is_one_line_naming_the_setting_and_which() -> None:
    line = refusal({"CHIEF_FALLBACK_URLS": f"{GOOD} mailto://a@b?port=abc"})
    assert line.startswith("CHIEF_FALLBACK_URLS: URL 2 of 2, mailto://… ("), line
    assert "a@b" not in line
    assert "Apprise" in line


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    secret=st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="@/?#%,:"),
        min_size=8,
        max_size=20,
    )
)
def test_no_refusal_and_no_log_line_shows_what_a_url_hides(
    caplog: pytest.LogCaptureFixture, secret: str
) -> None:
    """Whatever the password or token of a URL (its userinfo, host or path; a token pasted
    alone), a refusal never shows it, and neither does Apprise's own log while the door checks
    the URLs (it logs an unsupported URL whole). The scheme is said: it names the service."""
    caplog.clear()
    refused = 0
    for url in (f"nosuch://coop:{secret}@example.org", f"mailto://coop:{secret}@example.org",
                f"nosuch://{secret}/topic", secret):  # fmt: skip
        line = said(url)
        refused += line is not None
        assert line is None or secret not in line, (url, line)
    assert refused >= 1  # the unknown scheme at least
    assert not [r.getMessage() for r in caplog.records if secret in r.getMessage()]


def test_the_url_file_must_be_private_readable_and_not_empty(tmp_path: Path) -> None:
    path = url_file(tmp_path, GOOD + "\n")
    found = fallback_settings.from_env({"CHIEF_FALLBACK_URLS_FILE": str(path)}, test_short=False)
    assert found is not None
    assert found.urls == (GOOD,)
    assert found.urls_from == str(path)
    path.chmod(0o644)
    line = refusal({"CHIEF_FALLBACK_URLS_FILE": str(path)})
    assert line.startswith("CHIEF_FALLBACK_URLS_FILE"), line
    assert "chmod" in line
    assert "password" in line
    missing = refusal({"CHIEF_FALLBACK_URLS_FILE": str(tmp_path / "none")})
    assert missing.startswith("CHIEF_FALLBACK_URLS_FILE"), missing
    assert "cannot be read" in missing
    empty = refusal({"CHIEF_FALLBACK_URLS_FILE": str(url_file(tmp_path, "\n"))})
    assert "empty" in empty


def test_both_url_settings_at_once_are_refused(tmp_path: Path) -> None:
    path = url_file(tmp_path, GOOD)
    line = refusal({"CHIEF_FALLBACK_URLS": GOOD, "CHIEF_FALLBACK_URLS_FILE": str(path)})
    assert "both set" in line


def test_the_delay_has_a_floor_the_test_switch_lowers() -> None:
    env = {"CHIEF_FALLBACK_URLS": GOOD, "CHIEF_FALLBACK_AFTER_S": "30"}
    line = refusal(env)
    assert line.startswith("CHIEF_FALLBACK_AFTER_S='30' must be"), line
    assert "at least 60" in line
    found = fallback_settings.from_env(env, test_short=True)
    assert found is not None
    assert found.after_s == 30.0
    assert "CHIEF_FALLBACK_AFTER_S" in refusal(env | {"CHIEF_FALLBACK_AFTER_S": "0.5"},
                                               test_short=True)  # fmt: skip


@pytest.mark.parametrize("raw", ["0", "121", "twelve", "-1"])
def test_the_hourly_bound_is_refused_out_of_range(raw: str) -> None:
    line = refusal({"CHIEF_FALLBACK_URLS": GOOD, "CHIEF_FALLBACK_MAX_PER_HOUR": raw})
    assert line.startswith(f"CHIEF_FALLBACK_MAX_PER_HOUR={raw!r}"), line


def test_apprise_missing_is_one_line_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry in sys.modules is how Python itself says a module cannot be imported.
    monkeypatch.setitem(sys.modules, "apprise", None)
    line = refusal({"CHIEF_FALLBACK_URLS": GOOD})
    assert "pip install 'coop-notifier[fallback]'" in line
    assert fallback_settings.from_env({}, test_short=False) is None  # unset: never imported
