"""Every declared integer, float and boolean setting (ops/settings.toml's `type`) takes exactly
its documented form, at the loader its process calls: ASCII digits (and one point for a float),
or one of a switch's `words`. Anything else is refused in one line naming the setting.

Before: `CHIEF_URGENT_RERING_S=٣٠` (Arabic-Indic digits) was read as 30, `1_0` as 10 and
`inf`/`1e3` as numbers (Python's `int()`/`float()` take them), and `COOP_LOG_TIMESTAMP=yes` was
silently taken as `on`. The loaders are the real ones (`EngineConfig.from_env`, the status
check's bound, `ServiceConfig.from_env`, `NotifierConfig.from_env`, `DoorConfig.from_env`, each
package's `configure_logging`); tests/e2e/ops/test_settings_refused.py starts the processes.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chief.door.config import DoorConfig
from chief.errors import DoorError
from engine import status as engine_status
from engine.config import EngineConfig
from engine.errors import UsageError
from notifier.config import NotifierConfig
from notifier.errors import ConfigError
from plumbing import logs as plumbing_logs

ROOT = Path(__file__).resolve().parents[2]
KEY = "k" * 32
BLANKS = " \t\r\n"
WHOLE = re.compile(r"[0-9]+")
DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def typed() -> dict[str, dict[str, object]]:
    with (ROOT / "ops" / "settings.toml").open("rb") as handle:
        every = tomllib.load(handle)["setting"]
    return {s["name"]: s for s in every if "type" in s}


class Refused(Exception):
    """A loader's one-line refusal, whatever the package's error class."""


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """`env` as the process's environment while a loader that reads `os.environ` runs."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _logging(configure: Callable[[], None]) -> Callable[[dict[str, str]], None]:
    def load(env: dict[str, str]) -> None:
        with _environment(env):
            try:
                configure()
            except SystemExit as exc:
                raise Refused(f"exit {exc.code}") from None

    return load


def _status(env: dict[str, str]) -> None:
    engine_status.max_pending_age(None, env)


#: Each typed setting's loaders: the code its processes call at start (COOP_EMULATOR_PORT is
#: read by ops/run's shell alone).
LOADERS: dict[str, list[Callable[[dict[str, str]], object]]] = {
    "COOP_STALE_AFTER_S": [lambda env: EngineConfig.from_env(env, db="/nonexistent/coop.db")],
    "COOP_REMIND_MAX": [lambda env: EngineConfig.from_env(env, db="/nonexistent/coop.db")],
    "COOP_STATUS_MAX_PENDING_AGE_S": [_status],
    "COOP_CLIENT_TIMEOUT_S": [NotifierConfig.from_env, DoorConfig.from_env],
    "COOP_BACKOFF_BASE_S": [NotifierConfig.from_env],
    "COOP_BACKOFF_MAX_S": [NotifierConfig.from_env],
    "COOP_UNREACHABLE_RETRY_S": [NotifierConfig.from_env],
    "COOP_BACKSTOP_S": [NotifierConfig.from_env],
    "COOP_BATCH_MAX": [NotifierConfig.from_env],
    "CHIEF_NOTIFY_BATCH_MAX": [DoorConfig.from_env],
    "CHIEF_NOTIFY_BODY_MAX_BYTES": [DoorConfig.from_env],
    "CHIEF_URGENT_RERING_S": [DoorConfig.from_env],
    "CHIEF_ESCALATE_AFTER_S": [DoorConfig.from_env],
    "CHIEF_URGENT_EXPIRE_S": [DoorConfig.from_env],
    "CHIEF_TEST_URGENT_SHORT": [DoorConfig.from_env],
    "CHIEF_FALLBACK_AFTER_S": [DoorConfig.from_env],
    "CHIEF_FALLBACK_MAX_PER_HOUR": [DoorConfig.from_env],
    "TELEGRAM_TIMEOUT_S": [DoorConfig.from_env],
    "COOP_LOG_TIMESTAMP": [
        _logging(plumbing_logs.configure_logging),
    ],
}
SHELL_ONLY = frozenset({"COOP_EMULATOR_PORT"})


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A complete environment every loader accepts: one data folder, a private key."""
    home = tmp_path_factory.mktemp("settings")
    key = home / "service.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    return {
        "HOME": str(home),
        "COOP_HOME": str(home),
        "COOP_DB": str(home / "coop.db"),
        "COOP_SERVICE_KEY_FILE": str(key),
    }


def _refusal(load: Callable[[dict[str, str]], object], env: dict[str, str]) -> str:
    """The loader's refusal, in one line (its message, or the line it wrote before exiting)."""
    try:
        load(env)
    except (UsageError, ConfigError, DoorError) as exc:
        return str(exc.message)
    except Refused as exc:
        return str(exc)
    pytest.fail(f"accepted: {env}")


def test_every_typed_setting_has_its_loaders() -> None:
    declared = set(typed())
    assert declared - SHELL_ONLY == set(LOADERS), "give each typed setting its loaders here"
    kinds = {str(setting["type"]) for setting in typed().values()}
    assert kinds == {"int", "float", "bool"}


def test_the_documented_form_is_accepted(base_env: dict[str, str]) -> None:
    """Each loader takes the base environment, and each switch its every word."""
    for name, loaders in LOADERS.items():
        setting = typed()[name]
        values = [str(w) for w in setting.get("words", [])] or [""]  # type: ignore[union-attr]
        for value in values:
            for load in loaders:
                load(base_env | ({name: value} if value else {}))


# Digits of every script but ASCII, and the forms int() and float() take beyond the documented.
FOREIGN_DIGITS = st.characters(categories=("Nd",)).filter(lambda c: not c.isascii())
TRICKS = st.sampled_from(
    ["٣٠", "３０", "1_0", "+5", "-5", "5.0", "1e3", "inf", "nan", "0x10", "½", "30s", "yes", "TRUE"]
)
VALUES = st.one_of(
    TRICKS,
    st.text(FOREIGN_DIGITS, min_size=1, max_size=4),
    st.builds(
        lambda a, b, c: a + b + c,
        st.sampled_from(["", "1", "30", " 2"]),
        st.one_of(FOREIGN_DIGITS, st.sampled_from(["_", "e", "+", ".", ",", "٫"])),
        st.sampled_from(["", "0", "5 "]),
    ),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6),
)


def _documented(kind: str, words: list[str], raw: str) -> bool:
    text = raw.strip(BLANKS)
    if not text:
        return True  # unset: the default
    if kind == "int":
        return WHOLE.fullmatch(text) is not None
    if kind == "float":
        return DECIMAL.fullmatch(text) is not None
    return text.lower() in words


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(name=st.sampled_from(sorted(LOADERS)), raw=VALUES)
def test_every_undocumented_value_is_refused_in_one_line_naming_the_setting(
    base_env: dict[str, str], name: str, raw: str
) -> None:
    setting = typed()[name]
    words = [str(w) for w in setting.get("words", [])]  # type: ignore[union-attr]
    if _documented(str(setting["type"]), words, raw):
        return
    for load in LOADERS[name]:
        line = _refusal(load, base_env | {name: raw})
        assert "\n" not in line, line
        if not line.startswith("exit "):
            assert name in line, (name, raw, line)
